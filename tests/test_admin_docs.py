"""The operator's documentation matches the code: every metric is named in docs/operating.md
and drawn in the shipped Grafana dashboard, the dashboard queries only metrics that exist,
and the inspector screenshot it shows is committed and small."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bot.admin.metrics import Metrics

ROOT = Path(__file__).resolve().parent.parent
OPERATING = (ROOT / "docs" / "operating.md").read_text()


def _families() -> set[str]:
    """Metric names as exposed (counters with ``_total``)."""
    out = set()
    for family in Metrics().registry.collect():
        out.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return out


def test_every_metric_is_documented() -> None:
    section = OPERATING.split("## Health, metrics and logs", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(gistbot_[a-z_]+)`", section))
    assert _families() <= documented, sorted(_families() - documented)
    assert documented <= _families(), sorted(documented - _families())


def test_grafana_dashboard_draws_every_metric_and_only_real_ones() -> None:
    dash = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|count|sum)$", "", m)
            for e in exprs for m in re.findall(r"gistbot_[a-z_]+", e)}
    assert used == _families(), (sorted(used - _families()), sorted(_families() - used))
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_inspector_screenshot_is_committed_and_small() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", OPERATING)
    assert images, "docs/operating.md shows no screenshot"
    for image in images:
        path = ROOT / "docs" / image
        assert path.exists() and path.stat().st_size < 200_000, image
