"""An inline SVG line chart (no JavaScript, no library): what each reply's prompt carried
of memory vs what sending the channel's full history would have cost at that point."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["prompt_plot"]

W, H, PAD_L, PAD_B, PAD_T, PAD_R = 720, 240, 64, 28, 16, 16


def _path(points: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points))


def prompt_plot(rows: Sequence[tuple[int, int, int]]) -> str:
    """``rows`` are (seq, prompt tokens, full-history tokens) per reply, oldest first.

    The markup is safe to insert unescaped (the template marks it ``|safe``): every text in
    it is a number or passed through ``html.escape``."""
    if not rows:
        return ('<p class="muted">No replies since the bot started: the chart fills as it '
                "answers.</p>")
    top = max(max(r[1], r[2]) for r in rows) or 1
    lo, hi = rows[0][0], rows[-1][0]
    span = max(1, hi - lo)

    def xy(seq: int, value: int) -> tuple[float, float]:
        x = PAD_L + (seq - lo) / span * (W - PAD_L - PAD_R) if len(rows) > 1 else W / 2
        return x, H - PAD_B - value / top * (H - PAD_B - PAD_T)

    sent = [xy(s, p) for s, p, _ in rows]
    full = [xy(s, f) for s, _, f in rows]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="#2563eb"/>' for x, y in sent)
    grid = "".join(
        f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
        f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">'
        f"{escape(f'{v:,}')}</text>"
        for v, (_, y) in ((v, xy(lo, v)) for v in (0, top // 2, top))
    )
    last = rows[-1]
    title = escape(f"{len(rows)} replies; the last sent {last[1]:,} memory tokens where the "
                   f"full history was {last[2]:,}")
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
        f'height="{H}" role="img" aria-label="{title}"><title>{title}</title>'
        f'<rect width="{W}" height="{H}" fill="#fff"/>{grid}'
        f'<path d="{_path(full)}" fill="none" stroke="#dc2626" stroke-width="2" '
        f'stroke-dasharray="5 3"/>'
        f'<path d="{_path(sent)}" fill="none" stroke="#2563eb" stroke-width="2"/>{dots}'
        f'<text x="{PAD_L}" y="{H - 8}" font-size="11">seq {lo}</text>'
        f'<text x="{W - PAD_R}" y="{H - 8}" font-size="11" text-anchor="end">seq {hi}</text>'
        f'<text x="{PAD_L + 8}" y="{PAD_T + 10}" font-size="12" fill="#2563eb">'
        f"— prompt memory tokens per reply</text>"
        f'<text x="{PAD_L + 8}" y="{PAD_T + 26}" font-size="12" fill="#dc2626">'
        f"- - full history up to that message</text></svg>"
    )
    return svg
