"""The non-Gaussian likelihoods of the RVM (Tipping 2001): Bernoulli with the logistic link
(eq. 23), softmax (eq. 28) and likelihoods of counts with the log link (T01 §3's Laplace
scheme with PRML §7.2.3): per point their log probability and its first three
derivatives in the latent ``F``, and the products with the design of the (basis, class)
pairs in a model that the Laplace approximation's Newton iteration needs (eqs. 24-25).

Each is the one object of its likelihood: besides the Newton terms it owns its PyMC
observed variable and its replicate draws. A latent likelihood (:class:`LatentLikelihood`:
of counts, :class:`CountLikelihood`, e.g. :class:`Poisson`; or of real targets,
:class:`RealLikelihood`, e.g. the Student-t) also owns its parameters (e.g. a dispersion)
and its predictive density and cdf, and the families, predictives and leave-one-out of the
library derive from it."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, gammaincc, gammaln, log_expit, logsumexp, softmax

LOGLIK_BLOCK = 2_000_000  # logits held at once when the pointwise log-likelihood is drawn

__all__ = ["Likelihood", "Bernoulli", "Softmax", "LatentLikelihood", "RealLikelihood",
           "CountLikelihood", "Poisson",
           "likelihood_for", "likelihood_of", "class_bounds", "pair_logits", "pair_gradient",
           "pair_hessian"]

LOG_RATE_MAX = 700.0  # exp(f) is taken at min(f, this): no overflow on a Newton trial step
RATE_MAX = 1e15  # replicate draws at rates above this are drawn at this rate (numpy's bound)


class Likelihood:
    """What the Laplace approximation's Newton iteration needs from a likelihood with ``n_out``
    logits per point, for the (basis, class) pairs ``Phi_act``, ``cls`` in the model."""

    n_out: int
    name: str  # the result's attrs["likelihood"]
    grad_scale = 1.0  # the size of a point's gradient term (the mode's convergence test)
    floor_reason = "classes"  # why weights reach the alpha floor (the fits' warning)
    param_names: tuple[str, ...] = ()  # its own parameters (in ``params``)
    params: dict = {}
    log_concave = True  # B >= 0 everywhere: every Newton step is a Newton step

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """``F`` (N, n_out)."""
        return pair_logits(Phi_act, cls, theta, self.n_out)

    def surrogate_precision(self, f: np.ndarray) -> np.ndarray:
        """Positive precisions (N,) of the Gaussian surrogate a one-output likelihood's
        sequential fit linearises on at logits ``f`` (N,) (TF03 eq. 14): ``B`` itself for a
        log-concave density."""
        return self.hess(f[:, None])[:, 0, 0]

    def initial_logits(self) -> np.ndarray:
        """``F`` (N, n_out) where the fast type-II ML loop linearises first (TF03 eq. 14),
        before any weight is in the model: zero logits (the classifier's ``y = 1/2``)."""
        return np.zeros((len(self.t), self.n_out))

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The likelihood's gradient ``J^T (t - y)`` in the pair weights and its negative
        Hessian ``J^T B J`` (T01 eq. 25)."""
        return (pair_gradient(Phi_act, cls, self.grad(F)),
                pair_hessian(Phi_act, cls, self.hess(F)))


    def draws_loglik(self, Phi_act: np.ndarray, cls: np.ndarray, theta_draws: np.ndarray
                     ) -> np.ndarray:
        """Pointwise ``ln p(t_n | w)`` (..., obs) for weight draws (..., P) of the pairs, a
        block of draws at a time (at most ``LOGLIK_BLOCK`` logits held at once): the logits
        of every draw at once would be K times the result, the softmax's temporaries more."""
        lead = theta_draws.shape[:-1]
        flat = theta_draws.reshape(int(np.prod(lead)), theta_draws.shape[-1])  # P may be 0
        N = Phi_act.shape[0]
        out = np.empty((flat.shape[0], N))
        step = max(1, LOGLIK_BLOCK // (N * self.n_out))
        for a in range(0, flat.shape[0], step):
            out[a : a + step] = self.loglik(pair_logits(Phi_act, cls, flat[a : a + step],
                                                        self.n_out))
        return out.reshape(*lead, N)


class Bernoulli(Likelihood):
    """Eq. (23): ``P(t=1) = sigma(f)``; one logit per point (``F`` is (N, 1))."""

    n_out = 1
    name = "bernoulli"

    def __init__(self, t: np.ndarray) -> None:
        self.t = np.asarray(t, dtype=float)
        self.sign = 2 * self.t - 1

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for logits ``F`` (..., N, 1)."""
        return log_expit(self.sign * F[..., 0])

    def grad(self, F: np.ndarray) -> np.ndarray:
        """``t - y`` (N, 1)."""
        return (self.t - expit(F[:, 0]))[:, None]

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = y_n (1 - y_n)`` as (N, 1, 1) (T01 eq. 25)."""
        f = F[:, 0]
        return (expit(f) * expit(-f))[:, None, None]

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        return (Phi_act @ theta)[:, None]

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The general terms written out for one logit (the fast loop's hot path)."""
        f = F[:, 0]
        y = expit(f)
        return Phi_act.T @ (self.t - y), Phi_act.T @ ((y * expit(-f))[:, None] * Phi_act)

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_n = 1/2 P_n dB_n/df_n`` with ``dB/df = B (1 - 2y)`` (for the width gradient)."""
        f = F[:, 0]
        y = expit(f)
        return (0.5 * P[:, 0, 0] * y * expit(-f) * (1 - 2 * y))[:, None]

    def draw(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Class codes ``t ~ Bernoulli(sigma(f))`` (1: ``classes[1]``) for logits ``f``."""
        return (rng.random(np.shape(f)) < expit(f)).astype(np.int64)

    def observe(self, f, t_obs, n) -> None:
        """``t ~ Bernoulli(sigma(f))`` as the observed ``t`` of a PyMC model, with the log
        density in the stable form ``t f - softplus(f)`` (PyMC's own ``logit_p`` density
        has NaN gradients once a logit passes ~37: ``1 - sigmoid`` rounds to 0) and PyMC's
        draws."""
        import pymc as pm

        pm.CustomDist("t", f, dist=_bernoulli_dist, logp=_bernoulli_logp,
                      signature="()->()", observed=t_obs, dims="obs", shape=n)


class Softmax(Likelihood):
    """Eq. (28): ``P(t=k) = softmax(f)_k``; one logit per class (``F`` is (N, K))."""

    name = "softmax"

    def __init__(self, t: np.ndarray, n_classes: int) -> None:
        self.n_out = n_classes
        self.codes = np.asarray(t, dtype=int)
        self.T = np.eye(n_classes)[self.codes]

    def initial_logits(self) -> np.ndarray:
        return np.zeros(self.T.shape)

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for logits ``F`` (..., N, K)."""
        return F[..., np.arange(F.shape[-2]), self.codes] - logsumexp(F, axis=-1)

    def grad(self, F: np.ndarray) -> np.ndarray:
        return self.T - softmax(F, axis=1)

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """For pairs sorted by class (as every caller holds them): with ``B_n = diag(y_n) -
        y_n y_n^T``, ``J^T B J`` is ``Phi_k^T diag(y_k) Phi_k`` on each class's diagonal block
        minus ``U^T U``, ``U = [y_k Phi_k]_k``: one product over all pairs instead of
        K(K+1)/2 weighted blocks, every class a contiguous slice (the fast loop's hot path)."""
        bounds = class_bounds(cls, self.n_out)
        if bounds is None:
            return super().newton_terms(Phi_act, cls, F)
        Y = softmax(F, axis=1)
        G = self.T - Y
        U = np.empty_like(Phi_act)
        g = np.empty(cls.size)
        for k in range(self.n_out):
            a, b = bounds[k], bounds[k + 1]
            np.multiply(Phi_act[:, a:b], Y[:, k, None], out=U[:, a:b])
            g[a:b] = G[:, k] @ Phi_act[:, a:b]
        H = -(U.T @ U)
        for k in range(self.n_out):
            a, b = bounds[k], bounds[k + 1]
            H[a:b, a:b] += Phi_act[:, a:b].T @ U[:, a:b]
        return g, H

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = diag(y_n) - y_n y_n^T`` (N, K, K): singular, rows sum to 0."""
        Y = softmax(F, axis=1)
        B = -Y[:, :, None] * Y[:, None, :]
        idx = np.arange(self.n_out)
        B[:, idx, idx] += Y
        return B

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_nk = 1/2 tr(P_n dB_n/df_nk) = 1/2 [B_n (diag P_n - 2 P_n y_n)]_k``."""
        Y = softmax(F, axis=1)
        B = self.hess(F)
        u = np.einsum("nii->ni", P) - 2 * np.einsum("nij,nj->ni", P, Y)
        return 0.5 * np.einsum("nik,ni->nk", B, u)

    def draw(self, F: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Class codes ``t ~ Categorical(softmax(F))`` for logits ``F`` (..., K)."""
        P = softmax(F, axis=-1)
        u = rng.random(P.shape[:-1])[..., None]
        return np.minimum((np.cumsum(P, axis=-1) < u).sum(axis=-1), P.shape[-1] - 1)

    def observe(self, F, t_obs, n) -> None:
        """``t ~ Categorical(softmax(F))`` as the observed ``t`` of a PyMC model, with the
        log density in the stable form ``F_t - logsumexp(F)`` (PyMC's ``logit_p`` density
        underflows once logits differ by ~745) and PyMC's draws."""
        import pymc as pm

        pm.CustomDist("t", F, dist=_categorical_dist, logp=_softmax_logp,
                      signature="(k)->()", observed=t_obs, dims="obs", shape=n)


def _bernoulli_dist(f, size):
    import pymc as pm

    return pm.Bernoulli.dist(logit_p=f, size=size)


def _bernoulli_logp(value, f):
    """``ln sigma(f)`` for ``t = 1``, ``ln sigma(-f)`` for ``t = 0`` (T01 eq. 23)."""
    import pytensor.tensor as pt

    return value * f - pt.softplus(f)


def _categorical_dist(F, size):
    import pymc as pm

    return pm.Categorical.dist(logit_p=F, size=size)


def _softmax_logp(value, F):
    """``F_t - ln sum_k exp F_k`` (T01 eq. 28)."""
    import pytensor.tensor as pt

    picked = pt.take_along_axis(F, pt.shape_padright(value).astype("int64"), axis=-1)
    return picked[..., 0] - pt.logsumexp(F, axis=-1)


class LatentLikelihood(Likelihood):
    """A likelihood of targets ``t_n`` with one latent value ``f_n`` per point, written once
    for every use:

    * per point (broadcasting over ``t``, ``f`` and the parameters): :meth:`logpdf`, its
      derivatives in ``f`` (:meth:`derivatives`: gradient, negative Hessian ``B`` and
      ``dB/df``; T01 eqs. 24-25 and App. C's width gradient), :meth:`cdf` and :meth:`draw`;
    * its parameters (:attr:`param_names`, in :attr:`params`): fixed, or learned by type-II
      ML over their logs within :attr:`log_bounds` (the Laplace fits), sampled under
      :meth:`prior_draws`' prior (PyMC, :meth:`observe`; the prior predictive);
    * :meth:`observe`, the observed ``t`` of the PyMC model.

    A subclass writes :meth:`logpdf`, :meth:`derivatives`, :meth:`cdf`, :meth:`draw` and
    :meth:`observe`, and for each parameter its bounds, start and prior. A density that is
    not log-concave in ``f`` (``B`` can be negative) sets ``log_concave = False`` and
    writes :meth:`surrogate_precision`."""

    n_out = 1
    label: str  # its name in messages
    log_bounds: dict[str, tuple[float, float]] = {}

    def __init__(self, t: np.ndarray, **params) -> None:
        unknown = set(params) - set(self.param_names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameter(s) {sorted(unknown)}; "
                            f"its parameters: {list(self.param_names)}")
        self.t = np.asarray(t, dtype=float)
        missing = [k for k in self.param_names if params.get(k) is None]
        start = self.initial_params(self.t) if missing else {}
        self.params = {k: start[k] if k in missing else params[k] for k in self.param_names}
        self.grad_scale = self.gradient_scale()

    def gradient_scale(self) -> float:
        """The size of a point's gradient term (the mode's convergence test): 1."""
        return 1.0

    def with_params(self, **params) -> LatentLikelihood:
        """The same likelihood and targets with other parameter values."""
        return type(self)(self.t, **{**self.params, **params})

    def with_targets(self, t: np.ndarray) -> LatentLikelihood:
        """The same likelihood and parameters on other targets."""
        return type(self)(t, **self.params)

    def initial_params(self, t: np.ndarray) -> dict:
        """The parameters' start (type-II ML) and default: none."""
        return {}

    def prior_draws(self, shape: tuple[int, ...], rng: np.random.Generator) -> dict:
        """Draws of the parameters from the prior :meth:`observe` puts on them (at the
        scale of this likelihood's targets where the prior has one)."""
        return {}

    def loglik(self, F: np.ndarray) -> np.ndarray:
        """Pointwise ``ln p(t_n | f_n)`` for ``F`` (..., N, 1)."""
        return self.logpdf(self.t, F[..., 0])

    def grad(self, F: np.ndarray) -> np.ndarray:
        """``d ln p / df`` (N, 1)."""
        return self.derivatives(F[:, 0])[0][:, None]

    def hess(self, F: np.ndarray) -> np.ndarray:
        """``B_n = -d^2 ln p / df^2`` as (N, 1, 1)."""
        return self.derivatives(F[:, 0])[1][:, None, None]

    def logits(self, Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray) -> np.ndarray:
        return (Phi_act @ theta)[:, None]

    def newton_terms(self, Phi_act: np.ndarray, cls: np.ndarray, F: np.ndarray,
                     positive: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``Phi^T g`` and ``Phi^T diag(B) Phi`` (T01 eq. 25); ``positive``: with the
        :meth:`surrogate_precision` for ``B`` (an ascent direction where ``B`` is not)."""
        g, B, _ = self.derivatives(F[:, 0])
        if positive:
            B = self.surrogate_precision(F[:, 0])
        return Phi_act.T @ g, Phi_act.T @ (B[:, None] * Phi_act)

    def third(self, F: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``c_n = 1/2 P_n dB_n/df_n`` (for the width gradient)."""
        return (0.5 * P[:, 0, 0] * self.derivatives(F[:, 0])[2])[:, None]


class RealLikelihood(LatentLikelihood):
    """A :class:`LatentLikelihood` of real targets whose parameters live at the targets'
    scale: :attr:`target_sd` is the sd of the training targets (1 if they do not vary), and
    :meth:`with_targets` keeps it, so held-out targets are judged at the fit's scale. A
    subclass derives its :attr:`log_bounds`, starts and priors from it."""

    def __init__(self, t: np.ndarray, **params) -> None:
        t = np.asarray(t, dtype=float)
        sd = float(np.std(t)) if t.size > 1 else 0.0
        self.target_sd = sd if sd > 0 else 1.0
        super().__init__(t, **params)

    def with_targets(self, t: np.ndarray) -> RealLikelihood:
        """The same parameters on other targets, at the training targets' scale."""
        out = type(self)(t, **self.params)
        out.target_sd = self.target_sd
        return out


class CountLikelihood(LatentLikelihood):
    """A :class:`LatentLikelihood` of counts with the log link (mean ``exp(f)``): besides
    the latent likelihood's methods, the conditional variance factor of
    :meth:`extra_variance` (``Var[t | f] = exp(f) + k exp(2 f)``)."""

    floor_reason = "counts"  # why weights reach the alpha floor (the fits' warning)

    def gradient_scale(self) -> float:
        """``max(1, max t)``: ``|t - mean|`` at the mode."""
        return max(1.0, float(self.t.max(initial=0.0)))

    @staticmethod
    def rate(f: np.ndarray) -> np.ndarray:
        """``exp(f)``, with ``f`` capped at :data:`LOG_RATE_MAX` (no overflow)."""
        return np.exp(np.minimum(f, LOG_RATE_MAX))

    def extra_variance(self):
        """``k`` in ``Var[t | f] = exp(f) + k exp(2 f)`` (0: Poisson)."""
        return 0.0

    def initial_logits(self) -> np.ndarray:
        """``log(t + 1/2)``: the GLM's usual first linearisation (the working response of
        IRLS, McCullagh & Nelder 1989 §2.5), not the rate 1 of ``f = 0``, which is far off
        for large counts."""
        return np.log(self.t + 0.5)[:, None]


class Poisson(CountLikelihood):
    """Counts ``t_n ~ Poisson(exp(f_n))`` with the log link (the RVM of Tipping 2001 §3 with
    a Poisson likelihood; PRML §7.2.3's Laplace scheme): ``ln p(t|f) = t f - e^f - ln t!``,
    gradient ``t - e^f``, negative Hessian ``B = e^f``. No parameters."""

    name = "poisson"
    label = "Poisson"

    def logpdf(self, t, f) -> np.ndarray:
        """``ln Poisson(t | exp(f)) = t f - exp(f) - ln t!`` elementwise (broadcast)."""
        return t * f - self.rate(f) - gammaln(np.asarray(t, dtype=float) + 1.0)

    def derivatives(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``t - e^f``, ``B = e^f`` and ``dB/df = e^f`` at the training counts."""
        lam = self.rate(f)
        return self.t - lam, lam, lam

    def cdf(self, k, f) -> np.ndarray:
        """``P(t <= k) = Q(k + 1, exp(f))`` (the regularised upper incomplete gamma)."""
        return gammaincc(np.asarray(k, dtype=float) + 1.0, self.rate(f))

    def draw(self, f: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Counts ``t ~ Poisson(exp(f))``; rates above ``RATE_MAX`` are drawn at it."""
        return rng.poisson(np.minimum(self.rate(f), RATE_MAX)).astype(np.int64)

    def observe(self, f, t_obs, n) -> None:
        """``t ~ Poisson(exp(f))`` as the observed ``t`` of a PyMC model, with the log density
        in the stable form ``t f - exp(f) - ln t!`` (PyMC's ``log(mu)`` of ``mu = exp(f)``
        loses ``f`` once ``exp(f)`` under- or overflows) and PyMC's Poisson draws."""
        import pymc as pm
        import pytensor.tensor as pt

        pm.CustomDist("t", f, dist=lambda f, size: pm.Poisson.dist(mu=pt.exp(f), size=size),
                      logp=lambda value, f: value * f - pt.exp(f) - pt.gammaln(value + 1.0),
                      signature="()->()", observed=t_obs, dims="obs", shape=n)


def likelihood_for(t: np.ndarray, n_classes: int, softmax_model: bool):
    return Softmax(t, n_classes) if softmax_model else Bernoulli(t)


def likelihood_of(problem, softmax_model: bool = False) -> Likelihood:
    """The likelihood of a non-Gaussian RVM problem on its targets ``problem.t``: the one
    its record declares (``problem.likelihood(softmax_model)``)."""
    return problem.likelihood(softmax_model)


def class_bounds(cls: np.ndarray, K: int) -> np.ndarray | None:
    """Where each class's pairs start and end, ``bounds[k]:bounds[k + 1]``, when the pairs
    are sorted by class (their columns are then contiguous slices); None otherwise."""
    if np.any(np.diff(cls) < 0):
        return None
    return np.searchsorted(cls, np.arange(K + 1))


def pair_logits(Phi_act: np.ndarray, cls: np.ndarray, theta: np.ndarray, K: int) -> np.ndarray:
    """``F[..., k] = Phi[:, pairs of class k] @ theta[..., pairs of class k]``: (N, K) for one
    weight vector ``theta`` (P,), (..., N, K) for a stack of them (..., P)."""
    if theta.ndim > 1:
        F = np.zeros((*theta.shape[:-1], Phi_act.shape[0], K))
        for k in range(K):
            sel = cls == k
            if sel.any():
                F[..., k] = theta[..., sel] @ Phi_act[:, sel].T
        return F
    if K == 1:
        return (Phi_act @ theta)[:, None]
    F = np.zeros((Phi_act.shape[0], K))
    bounds = class_bounds(cls, K)
    if bounds is not None:  # sorted by class: contiguous slices
        for k in range(K):
            F[:, k] = Phi_act[:, bounds[k] : bounds[k + 1]] @ theta[bounds[k] : bounds[k + 1]]
        return F
    for k in range(K):
        sel = cls == k
        if sel.any():
            F[:, k] = Phi_act[:, sel] @ theta[sel]
    return F


def pair_gradient(Phi_act: np.ndarray, cls: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``J^T g``: ``sum_n Phi[n, col_j] G[n, cls_j]`` for every pair j."""
    if G.shape[1] == 1:
        return Phi_act.T @ G[:, 0]
    return np.einsum("nj,nj->j", Phi_act, G[:, cls])


def pair_hessian(Phi_act: np.ndarray, cls: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``J^T B J`` (the data part of T01 eq. 25) from per-class blocks
    ``Phi_k^T diag(B[:, k, l]) Phi_l``: the pairs are grouped by class (one stable sort), each
    block is a product of contiguous column slices, and the result is permuted back. Memory
    O(N P + P^2) for P pairs in the model: no (NK)-sized object."""
    K = B.shape[1]
    if K == 1:
        return Phi_act.T @ (B[:, 0, 0, None] * Phi_act)
    order = np.argsort(cls, kind="stable")
    bounds = np.searchsorted(cls[order], np.arange(K + 1))
    Ps = Phi_act[:, order]
    Hs = np.empty((cls.size, cls.size))
    for k in range(K):
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            continue
        for j in range(k, K):
            c, d = bounds[j], bounds[j + 1]
            if c == d:
                continue
            block = Ps[:, a:b].T @ (B[:, k, j, None] * Ps[:, c:d])
            Hs[a:b, c:d] = block
            Hs[c:d, a:b] = block.T
    H = np.empty_like(Hs)
    H[np.ix_(order, order)] = Hs
    return H
