"""Metric names in PromQL expressions and in a Prometheus text exposition (test tooling).

:func:`metric_names` is a small tokenizer, not a parser: it removes string literals,
label matchers ``{...}``, ranges/subqueries ``[...]``, Grafana variables (``$x``,
``${x}``) and the label lists of ``by``/``without``/``on``/``ignoring``/``group_left``/
``group_right``, then keeps every identifier that is not a function call (followed by
``(``), an operator keyword or a number literal (``Inf``, ``NaN``). What is left are
the selectors' metric names, e.g. ``rate(a_total{x="y"}[5m]) / on (x) b`` → ``{a_total, b}``.

:func:`exported_sample_names` reads the ``# TYPE`` lines of a scrape and expands each
family into the sample names a query may select, the way prometheus_client names them:
a counter family is typed under ``<name>_total`` (its only queryable sample), a
histogram gives ``_bucket``, ``_sum`` and ``_count``, a summary ``_sum``/``_count`` and
the bare name, gauges and untyped families their name. A family with labels but no
children yet still has its ``# TYPE`` line, so the check does not depend on traffic.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset({
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "offset", "atan2", "inf", "nan",
})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NUMBERS = re.compile(r"(?<![\w:])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\w*")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_TYPE_LINE = re.compile(r"^# TYPE (\S+) (\S+)$")


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (see the module docstring)."""
    text = _STRINGS.sub(" ", expr)
    text = _VARIABLES.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    text = _NUMBERS.sub(" ", text)
    names: set[str] = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        if name.lower() in KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue
        names.add(name)
    return names


def label_values_metric(query: str) -> str | None:
    """The metric of a Grafana ``label_values(metric, label)`` query (None: no metric)."""
    found = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)(?:\{[^}]*\})?\s*,\s*\w+\s*\)\s*",
                         query)
    return found.group(1) if found else None


_SUFFIXES = {
    "counter": ("",),  # prometheus_client types counters under their _total name
    "gauge": ("",),
    "untyped": ("",),
    "unknown": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("", "_sum", "_count"),
    "info": ("",),
    "stateset": ("",),
}


def exported_sample_names(exposition: str) -> dict[str, str]:
    """Queryable sample name → its family's type, from the ``# TYPE`` lines of a scrape."""
    names: dict[str, str] = {}
    for line in exposition.splitlines():
        found = _TYPE_LINE.match(line)
        if found is None:
            continue
        family, kind = found.groups()
        for suffix in _SUFFIXES[kind]:
            names[family + suffix] = kind
    return names
