"""The inspector's pages: Jinja2 templates with autoescaping on, inline CSS, no script and
no external asset (it works without a CDN or a network). Every value is escaped by the
template engine; the only markup built in Python is the plot's SVG (``bot.admin.plot``),
which escapes its own text and is inserted with ``|safe``."""

from __future__ import annotations

from typing import Any

from jinja2 import DictLoader, Environment, select_autoescape

__all__ = ["render"]

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{% block title %}gistbot inspector{% endblock %}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1em;align-items:center}
header a{color:#fff} header form{margin-left:auto}
main{padding:1em 1.2em;max-width:1200px}
h1{font-size:1.3em;margin:.2em 0} h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border:1px solid #dde1e7;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#eef1f5} td.num{text-align:right;font-variant-numeric:tabular-nums}
pre,textarea{font:13px/1.4 ui-monospace,monospace;white-space:pre-wrap;word-break:break-word}
pre{background:#fff;border:1px solid #dde1e7;padding:.6em;margin:.3em 0}
textarea{width:100%;box-sizing:border-box;min-height:12em}
.notice{background:#e7f5ea;border:1px solid #9ccca6;padding:.5em .8em;margin:.6em 0}
.error{background:#fdecec;border:1px solid #e3a1a1;padding:.5em .8em;margin:.6em 0}
.muted{color:#6b7485} .superseded{color:#8a8f99;text-decoration:line-through}
.add{background:#e6f6e9} .del{background:#fbe9e9}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1em}
details{background:#fff;border:1px solid #dde1e7;margin:.3em 0;padding:.3em .6em}
form.inline{display:inline} button{cursor:pointer}
</style></head><body>
<header><strong>gistbot inspector</strong>
{% if csrf %}<a href="/inspector/">channels</a>
<form method="post" action="/inspector/logout"><input type="hidden" name="csrf" value="{{ csrf }}">
<button>log out</button></form>{% endif %}</header>
<main>
{% if notice %}<div class="notice" role="status">{{ notice }}</div>{% endif %}
{% if error %}<div class="error" role="alert">{{ error }}</div>{% endif %}
{% block body %}{% endblock %}
</main></body></html>
"""

_LOGIN = """{% extends "base" %}{% block body %}
<h1>Log in</h1>
<form method="post" action="/inspector/login">
<label>Admin token <input type="password" name="token" autocomplete="current-password"
 autofocus></label> <button>Log in</button></form>
<p class="muted">The token is the server's ADMIN_TOKEN setting.</p>
{% endblock %}"""

_CHANNELS = """{% extends "base" %}{% block body %}
<h1>Channels</h1>
<form method="get" action="/inspector/">
<input name="q" value="{{ q }}" placeholder="search channel">
<select name="platform"><option value="">all platforms</option>
{% for p in platforms %}<option value="{{ p }}"{% if p == platform %} selected{% endif %}>{{ p }}
</option>{% endfor %}</select> <button>Filter</button></form>
<p class="muted">{{ rows|length }} of {{ total }} channels{% if rows|length < total %} shown{% endif %}</p>
<table><tr><th>platform</th><th>workspace</th><th>channel</th><th>messages</th>
<th>unsummarized</th><th>oldest unsummarized</th><th>last activity</th><th>last compaction</th></tr>
{% for r in rows %}<tr>
<td>{{ r.key.platform }}</td><td>{{ r.key.workspace }}</td>
<td><a href="/inspector/channel?c={{ r.ref|urlencode }}">{{ r.key.channel }}</a></td>
<td class="num">{{ r.turns }}</td><td class="num">{{ r.pending }}</td>
<td>{{ r.lag }}</td><td>{{ r.last }}</td><td>{{ r.compacted }}</td></tr>
{% else %}<tr><td colspan="8" class="muted">no channels</td></tr>{% endfor %}
</table>{% endblock %}"""

_CHANNEL = """{% extends "base" %}{% block title %}{{ key.channel }} · gistbot{% endblock %}
{% block body %}
{% set hidden %}<input type="hidden" name="csrf" value="{{ csrf }}">
<input type="hidden" name="c" value="{{ ref }}">{% endset %}
<h1>{{ key.platform }} · {{ key.workspace }} · {{ key.channel }}</h1>
<p class="muted">version {{ state.version }} · {{ stats.turns }} messages ({{ stats.folded }}
summarized, {{ stats.pending }} unsummarized) · {{ state.compactions }} compactions · last
compaction {{ compacted }}{% if busy %} · compaction running{% endif %}</p>
<h2>Summary</h2>
<form method="post" action="/inspector/channel/summary">
{{ hidden }}
<input type="hidden" name="version" value="{{ state.version }}">
<textarea name="text" aria-label="summary">{{ draft if draft is not none else state.text }}</textarea>
<button>Save summary</button> <span class="muted">saved as a new version only if no
compaction or other change happened since this page was loaded</span></form>
<form class="inline" method="post" action="/inspector/channel/compact">
{{ hidden }}
<button>Compact now</button></form>
<form class="inline" method="post" action="/inspector/channel/reset">
{{ hidden }}
<label><input type="checkbox" name="confirm" value="yes"> really</label>
<button>Reset channel (forget everything)</button></form>
<h2>Prompt tokens per reply</h2>{{ plot|safe }}
<h2>Summary history</h2>
{% for v in history %}<details{% if loop.first %} open{% endif %}><summary>version
{{ v.version }} · {{ v.when }} · {{ v.source }}{% if v.author %} by {{ v.author }}{% endif %} ·
{% if v.folded %}folded seq {{ v.first_seq }}–{{ v.last_seq }}{% else %}folded nothing{% endif %}
</summary><pre>{% for tag, line in v.diff %}<span class="{{ 'add' if tag == '+' else 'del' if tag == '-' else '' }}">{{ tag }} {{ line }}</span>
{% endfor %}</pre></details>
{% else %}<p class="muted">no summary committed yet</p>{% endfor %}
<div class="grid"><div>
<h2>Kept identifiers</h2>
<table><tr><th>identifier</th><th>context</th><th>seqs</th></tr>
{% for f in state.facts %}<tr><td>{{ f.value }}</td><td>{{ f.context }}</td>
<td class="num">{{ f.first_seq }}–{{ f.last_seen_seq }}</td></tr>
{% else %}<tr><td colspan="3" class="muted">none</td></tr>{% endfor %}</table>
</div><div>
<h2>Long-term facts</h2>
<table><tr><th>#</th><th>fact</th><th></th></tr>
{% for f in facts %}<tr><td class="num">{{ f.id }}</td>
<td{% if f.superseded_by %} class="superseded"{% endif %}>{{ f.text }}{% if f.pinned %}
<span class="muted">(pinned{% if f.author %} by {{ f.author }}{% endif %})</span>{% endif %}
{% if f.superseded_by %}<span class="muted">superseded by #{{ f.superseded_by }}</span>{% endif %}</td>
<td><form method="post" action="/inspector/channel/fact/delete">
{{ hidden }}
<input type="hidden" name="fact" value="{{ f.id }}">
<button aria-label="delete fact {{ f.id }}">delete</button>
</form></td></tr>
{% else %}<tr><td colspan="3" class="muted">none</td></tr>{% endfor %}</table>
</div></div>
<h2>Episodes</h2>
{% for e in episodes %}<details><summary>seq {{ e.first_seq }}–{{ e.last_seq }} ·
{{ e.when }} · {{ e.speakers|join(", ") }}</summary><pre>{{ e.text }}</pre></details>
{% else %}<p class="muted">none</p>{% endfor %}
<h2>Recent messages</h2>
<form method="get" action="/inspector/channel"><input type="hidden" name="c" value="{{ ref }}">
<input name="q" value="{{ q }}" placeholder="search messages"> <button>Search</button></form>
<table><tr><th>seq</th><th>time</th><th>author</th><th>text</th><th></th></tr>
{% for t in turns %}<tr><td class="num">{{ t.seq }}</td><td>{{ t.when }}</td>
<td>{{ t.author_name or t.author_id }}{% if t.role == "assistant" %} (bot){% endif %}</td>
<td><pre>{{ t.text }}</pre>{% if t.folded %}<span class="muted">summarized</span>{% endif %}</td>
<td>{% if not t.folded %}<form method="post" action="/inspector/channel/turn/delete">
{{ hidden }}
<input type="hidden" name="message" value="{{ t.message_id }}"><button>delete</button>
</form>{% endif %}
</td></tr>{% else %}<tr><td colspan="5" class="muted">no messages</td></tr>{% endfor %}</table>
{% endblock %}"""

_ENV = Environment(
    loader=DictLoader({"base": _BASE, "login": _LOGIN, "channels": _CHANNELS,
                       "channel": _CHANNEL}),
    autoescape=select_autoescape(default=True, default_for_string=True),
)


def render(name: str, **context: Any) -> str:
    """Render one page; ``notice``, ``error`` and ``csrf`` default to empty."""
    context.setdefault("notice", "")
    context.setdefault("error", "")
    context.setdefault("csrf", "")
    return _ENV.get_template(name).render(**context)
