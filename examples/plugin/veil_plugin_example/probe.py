"""knn: a k-nearest-neighbours adversary for the audit (`audit.suite` and the capacity sweep's `probes` accept it).
It reads s off the release's local structure, with no training to under-fit: a release that hides s from the
built-in MLPs but keeps neighbours of one class together still shows here."""

from __future__ import annotations

import numpy as np

from veil.audit.families import ProbeBudget, register_probe

NEIGHBOURS = 25


@register_probe("knn", f"{NEIGHBOURS}-nearest neighbours, distance-weighted (scikit-learn)", seeded=False)
def knn(
    z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, seed: int, budget: ProbeBudget
) -> np.ndarray:
    from sklearn.neighbors import KNeighborsClassifier

    model = KNeighborsClassifier(n_neighbors=min(NEIGHBOURS, len(z_train)), weights="distance")
    model.fit(z_train, y_train)
    proba = np.zeros((len(z_test), n_classes))
    proba[:, model.classes_] = model.predict_proba(z_test)  # classes absent from the train rows get probability 0
    return proba
