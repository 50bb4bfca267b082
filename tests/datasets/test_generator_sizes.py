"""gaussian-correlated draws a dim x dim rotation (a QR growing as dim^3): its dim is bounded, up front."""

from __future__ import annotations

import pytest

from veil.cli import main
from veil.datasets import load_dataset
from veil.errors import ConfigError

RUN = ["run", "-m", "gpp", "-d", "gaussian-correlated", "--check"]


@pytest.mark.parametrize("dim", [5000, 100000])
def test_a_dim_whose_rotation_takes_minutes_or_cannot_fit_is_refused(in_tmp, capsys, dim):
    assert main([*RUN, "-p", f"dim={dim}"]) == 2  # 100,000 was a 74.5 GiB allocation in np.linalg.qr
    err = capsys.readouterr().err
    assert f"invalid value for 'dim': {dim} (allowed: int >= 4 and <= 4096)" in err and "Traceback" not in err
    assert list(in_tmp.iterdir()) == []
    with pytest.raises(ConfigError, match=rf"'dim': {dim} \(allowed: int >= 4 and <= 4096"):
        load_dataset("gaussian-correlated", {"dim": dim}, use_cache=False)
