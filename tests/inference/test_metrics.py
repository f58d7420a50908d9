"""Metrics against scikit-learn, SciPy and the t-test written out by hand."""

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from sparsebayes.inference import metrics
from sparsebayes.inference.predictive.classification import ClassPredictive
from sparsebayes.inference.predictive.regression import MixturePredictive, Predictive


def regression_case(seed=0, n=200):
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    var = rng.uniform(0.1, 2.0, n)
    y = mean + np.sqrt(var) * rng.standard_normal(n)
    return Predictive(mean=mean, var=var), y


def test_regression_losses_against_sklearn_and_scipy():
    pred, y = regression_case()
    assert metrics.squared_error(pred, y) == pytest.approx(skm.mean_squared_error(y, pred.mean),
                                                           rel=1e-14)
    assert metrics.rmse(pred, y) == pytest.approx(skm.root_mean_squared_error(y, pred.mean),
                                                  rel=1e-14)
    assert metrics.absolute_error(pred, y) == pytest.approx(
        skm.mean_absolute_error(y, pred.mean), rel=1e-14)
    assert metrics.mae(pred.mean, y) == metrics.absolute_error(pred, y)  # arrays work too
    ref = -np.mean(stats.norm.logpdf(y, pred.mean, np.sqrt(pred.var)))
    assert metrics.nlpd(pred, y) == pytest.approx(ref, rel=1e-14)
    z = stats.norm.ppf(0.95)
    inside = np.abs(y - pred.mean) <= z * np.sqrt(pred.var)
    assert metrics.coverage(pred, y, 0.9) == np.mean(inside)
    # y drawn from the predictive: coverage near p (binomial sd 0.02 for n = 200)
    assert abs(metrics.coverage(pred, y, 0.9) - 0.9) < 0.07


def test_metrics_accept_mixtures():
    pred, y = regression_case(n=20)
    mix = MixturePredictive(np.stack([pred.mean - 0.1, pred.mean + 0.1]),
                            np.stack([pred.var, pred.var]))
    ref = -np.mean(np.log(0.5 * stats.norm.pdf(y, pred.mean - 0.1, np.sqrt(pred.var))
                          + 0.5 * stats.norm.pdf(y, pred.mean + 0.1, np.sqrt(pred.var))))
    assert metrics.nlpd(mix, y) == pytest.approx(ref, rel=1e-13)
    assert metrics.squared_error(mix, y) == pytest.approx(np.mean((y - pred.mean) ** 2))
    lo, hi = mix.interval(0.5)
    assert metrics.coverage(mix, y, 0.5) == np.mean((lo <= y) & (y <= hi))


def test_classification_metrics_against_sklearn():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(100, 3)) * 2
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    labels = np.array(["a", "b", "c"])
    y = labels[rng.integers(0, 3, 100)]
    cp = ClassPredictive(log_p, labels)
    proba = np.exp(log_p)
    assert metrics.log_loss(cp, y) == pytest.approx(skm.log_loss(y, proba, labels=labels),
                                                    rel=1e-12)
    assert metrics.log_loss(proba, y, classes=labels) == pytest.approx(metrics.log_loss(cp, y),
                                                                       rel=1e-12)
    assert metrics.error_rate(cp, y) == pytest.approx(
        skm.zero_one_loss(y, labels[proba.argmax(1)]))
    onehot = (y[:, None] == labels).astype(float)
    assert metrics.brier_score(cp, y) == pytest.approx(np.mean(np.sum((proba - onehot) ** 2, 1)))
    assert metrics.brier_score(cp, y) == pytest.approx(
        skm.brier_score_loss(y, proba, labels=labels, scale_by_half=False), rel=1e-12)
    # binary: the Brier (1950) score is twice the positive-class score
    p1 = rng.uniform(size=50)
    yb = rng.integers(0, 2, 50)
    assert metrics.brier_score(p1, yb) == pytest.approx(2 * skm.brier_score_loss(yb, p1))
    assert metrics.log_loss(p1, yb) == pytest.approx(skm.log_loss(yb, p1))
    assert metrics.error_rate(np.array([0, 1, 1]), np.array([0, 0, 1]), classes="labels") == \
        pytest.approx(1 / 3)


def test_paired_t_test_by_hand():
    rng = np.random.default_rng(2)
    a = rng.normal(0.5, 0.1, 10)
    b = a - 0.05 + 0.03 * rng.standard_normal(10)
    diff, p = metrics.paired_t_test(a, b)
    d = a - b
    t = d.mean() / (d.std(ddof=1) / np.sqrt(d.size))
    assert diff == pytest.approx(d.mean())
    assert p == pytest.approx(2 * stats.t.sf(abs(t), d.size - 1), rel=1e-10)
    with pytest.raises(ValueError, match="one value per split"):
        metrics.paired_t_test(a, b[:-1])
    with pytest.raises(ValueError, match="at least 2"):
        metrics.paired_t_test(a[:1], b[:1])


def test_metric_bad_input():
    pred, y = regression_case(n=5)
    with pytest.raises(ValueError, match="mismatched"):
        metrics.squared_error(pred, y[:-1])
    with pytest.raises(TypeError, match="logpdf"):
        metrics.nlpd(pred.mean, y)
    with pytest.raises(TypeError, match="interval"):
        metrics.coverage(pred.mean, y)
    with pytest.raises(ValueError, match="not among the classes"):
        metrics.log_loss(np.full((2, 2), 0.5), np.array([0, 2]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        metrics.brier_score(np.array([[1.5, -0.5]]), np.array([0]))
