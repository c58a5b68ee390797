#!/usr/bin/env python3
"""Parse Grafana dashboards with grafana-foundation-sdk (Grafana's own typed
models) and report what each panel holds, for tests/tests/ops/dashboards_sdk.rs.

    python3 tests/grafana/dashboards.py FILE.json...

Prints one JSON object: {file: {"title", "variables", "panels", "reencoded"}}
where each panel gives its type, title, description, unit, the class the SDK
decoded its options into (a panel type the SDK does not know stays a dict),
its legend options and its targets (the SDK's class, expr, legendFormat).
Exit 1 when the SDK refuses a file.
"""
import json
import sys

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard, RowPanel


def panel_report(p):
    if isinstance(p, RowPanel):
        return {"type": "row", "title": p.title, "panels": [panel_report(x) for x in p.panels or []]}
    defaults = p.field_config.defaults if p.field_config else None
    legend = getattr(p.options, "legend", None)
    return {
        "type": p.type_val,
        "title": p.title,
        "description": p.description or "",
        "unit": (defaults.unit if defaults else None) or "",
        "options_class": type(p.options).__module__ + "." + type(p.options).__name__,
        "legend": None if legend is None else {
            "show": getattr(legend, "show_legend", getattr(legend, "show", None)),
            "display_mode": str(getattr(legend, "display_mode", "")),
            "calcs": list(getattr(legend, "calcs", None) or []),
        },
        "targets": [
            {
                "class": type(t).__module__ + "." + type(t).__name__,
                "expr": getattr(t, "expr", None),
                "legend_format": getattr(t, "legend_format", None),
            }
            for t in p.targets or []
        ],
    }


def main(files):
    register_default_plugins()
    out = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            data = json.load(fh)
        d = Dashboard.from_json(data)
        reencoded = json.loads(json.dumps(d, cls=JSONEncoder))
        out[f] = {
            "title": d.title,
            "variables": [
                {"name": v.name, "type": str(v.type_val),
                 "current": None if v.current is None else v.current.value}
                for v in (d.templating.list_val if d.templating else None) or []
            ],
            "panels": [panel_report(p) for p in d.panels or []],
            "reencoded": {"title": reencoded.get("title"),
                          "panels": len(reencoded.get("panels", []))},
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
