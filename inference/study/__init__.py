"""Method comparison studies: data sets x splits x methods -> one tidy table.

A *cell* is one (data set, split, method): load the split, fit, predict on the test inputs,
score (:mod:`.cells`). Cells are independent and seeded from (study seed, data set, split,
method) only, so the table is the same whichever executor runs them (:mod:`.executors`):
this process, a pool of local processes or a Dask cluster. With an output folder every
finished cell is written at once (:mod:`.storage`), so an interrupted study resumes where it
stopped; a cell that raises records its error instead of stopping the study.

Method specs (:mod:`.specs`) are ``family/method[:key=value...]``: the family says which
model and predictive are used ("rvm", "rvm*" = RQ05's augmented predictive, "gp", "svm" =
scikit-learn's SVR/SVC with C by 5-fold CV, :mod:`.baselines`), the method is a ``fit``
method of :data:`sparsebayes.inference.api.FIT_METHODS`; ``sklearn=module.Class:k=v`` (or the
object) is any scikit-learn estimator. Data specs are ``name[:key=value...]`` with the names
in :data:`sparsebayes.models.datasets.DATASETS`, or the user's data (:mod:`.data`):
``PATH.csv:target=COLUMN``, a DataFrame, arrays. :mod:`.report` writes Markdown and HTML.
"""

from sparsebayes.models.datasets import CLASSIFICATION, REGRESSION, Split

from .cells import Cell, run_cell
from .data import DataSpec, load_split, parse_data, user_data
from .run import DEFAULT_STUDY, SMALL_STUDY, StudyConfig, run_study
from .specs import FAMILIES, MethodSpec, parse_methods
from .storage import MANIFEST, TABLE, TIMING_COLUMNS, StudyExistsError, load_table

__all__ = [
    "CLASSIFICATION",
    "DEFAULT_STUDY",
    "FAMILIES",
    "MANIFEST",
    "REGRESSION",
    "SMALL_STUDY",
    "TABLE",
    "TIMING_COLUMNS",
    "Cell",
    "DataSpec",
    "MethodSpec",
    "Split",
    "StudyConfig",
    "StudyExistsError",
    "load_split",
    "load_table",
    "parse_data",
    "parse_methods",
    "run_cell",
    "run_study",
    "user_data",
]
