"""The shared lazy NumPy and pandas of ``privmob.lazy_imports``."""

from __future__ import annotations

import subprocess
import sys


def test_np_and_pd_are_imported_on_first_use_only() -> None:
    code = (
        "import sys\n"
        "from privmob.lazy_imports import np, pd\n"
        "assert 'numpy' not in sys.modules and 'pandas' not in sys.modules\n"
        "assert np.int64(3) == 3 and 'numpy' in sys.modules\n"
        "assert 'pandas' not in sys.modules\n"
        "assert pd.DataFrame is sys.modules['pandas'].DataFrame\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_modules_share_one_stand_in() -> None:
    from privmob.lazy_imports import np
    from privmob.releases import od, values

    assert od.np is np and values.np is np
