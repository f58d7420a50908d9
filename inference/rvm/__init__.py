"""The relevance vector machine's posteriors (Tipping 2001): type-II maximum likelihood
(``evidence``: Gaussian likelihood; ``laplace``: Bernoulli and softmax), the variational RVM
(Bishop & Tipping 2000: ``vrvm``, ``vrvm_classification``) and PyMC's samplers (``pymc``),
over the shared sequential algorithm of Tipping & Faul (2003) (``sequential``,
``compiled``) and the design's sufficient statistics (``statistics``)."""
