"""Metric names in PromQL expressions and in a Prometheus text exposition (test tooling).

:func:`metric_names` is a small tokenizer, not a parser: it removes string literals,
label matchers ``{...}``, ranges/subqueries ``[...]``, Grafana variables (``$x``,
``${x}``) and the label lists of ``by``/``without``/``on``/``ignoring``/``group_left``/
``group_right``, then keeps every identifier that is not a function call (followed by
``(``), an operator keyword or a number literal (``Inf``, ``NaN``). What is left are
the selectors' metric names, e.g. ``rate(a_total{x="y"}[5m]) / on (x) b`` → ``{a_total, b}``.
Without promtool offline, :func:`called_names` (checked against :data:`FUNCTIONS`) and
:func:`balanced` catch the usual syntax slips: a misspelt function, an unclosed bracket.

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


FUNCTIONS = frozenset({
    # aggregation operators
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile", "limitk", "limit_ratio",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
    "histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
    "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc",
    "sort_by_label", "sort_by_label_desc", "sqrt", "time", "timestamp", "vector", "year",
    "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
    "present_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh",
    "sin", "sinh", "tan", "tanh", "deg", "rad", "pi",
})
"""PromQL's aggregation operators and functions (Prometheus 2.x/3.x)."""

_PAIRS = {")": "(", "]": "[", "}": "{"}


def called_names(expr: str) -> set[str]:
    """Identifiers called like functions (followed by ``(``), keywords' label lists excluded."""
    text = _LABEL_LISTS.sub(" ", _MATCHERS.sub(" ", _STRINGS.sub(" ", expr)))
    return {m.group(1) for m in re.finditer(r"([A-Za-z_][\w]*)\s*\(", text)
            if m.group(1).lower() not in KEYWORDS}


def balanced(expr: str) -> bool:
    """Brackets nest properly and every string literal is closed."""
    text = _STRINGS.sub(" ", expr)
    if any(quote in text for quote in "\"'`"):
        return False
    stack: list[str] = []
    for char in text:
        if char in "([{":
            stack.append(char)
        elif char in _PAIRS and (not stack or stack.pop() != _PAIRS[char]):
            return False
    return not stack


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
