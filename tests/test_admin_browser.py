"""The memory inspector in a real browser: Debian's Chromium driven by Playwright (its own
browser download is not used; ``.ci/run`` installs ``chromium``). The test logs in, opens a
channel, edits the summary, sees a concurrent compaction refuse a stale edit clearly without
losing it, deletes a fact, and keeps screenshots under ``tests/artifacts/`` (git-ignored)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from memory.models import ChannelKey
from tests.harness.admin import TOKEN, admin, fill

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
expect.set_options(timeout=30_000)  # a loaded CI machine; the default 5 s is for speed
KEY = ChannelKey("discord", "g1", "launch-planning")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run does it)")
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=_chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            yield b
        finally:
            await b.close()


async def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.mark.slow
async def test_operator_edits_memory_in_the_browser(tmp_path: Path, browser: Browser) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 14, mention_every=3,
                   text="message {i}: the Q3 launch moves to ORD-{i}0 review")
        await a.rt.memory.wait_idle()
        keep = await a.rt.memory.remember(KEY, "The launch owner is Dana")
        drop = await a.rt.memory.remember(KEY, "Budget is 40k EUR (outdated)")
        page = await browser.new_page(viewport={"width": 1200, "height": 900})

        # log in: a wrong token is refused, the right one opens the channel list
        await page.goto(f"{a.url}/inspector/")
        await expect(page.get_by_role("heading", name="Log in")).to_be_visible()
        await page.fill("input[name=token]", "not-the-token-at-all")
        await page.click("text=Log in >> nth=-1")
        await expect(page.get_by_role("alert")).to_have_text("Wrong token.")
        await page.fill("input[name=token]", TOKEN)
        await page.click("text=Log in >> nth=-1")
        await expect(page.get_by_role("heading", name="Channels")).to_be_visible()
        await _shot(page, "inspector-channels")
        assert TOKEN not in await page.content()

        # open the channel
        await page.click("text=launch-planning")
        await expect(page.get_by_role("heading", name="Summary", exact=True)).to_be_visible()
        await expect(page.locator("svg")).to_be_visible()
        await _shot(page, "inspector-channel")

        # edit the summary
        await page.fill("textarea[name=text]", "## Launch\n- moved to Q3; owner Dana")
        await page.click("text=Save summary")
        await expect(page.get_by_role("status")).to_have_text("Summary saved as a new version.")
        assert (await a.rt.store.state(KEY)).text == "## Launch\n- moved to Q3; owner Dana"

        # a compaction commits while the operator edits: the stale edit is refused, kept
        await fill(a.rt, KEY, 6, start=50)
        await page.reload()
        await page.fill("textarea[name=text]", "## Launch\n- my second edit")
        assert await a.rt.memory.compact_now(KEY, force=True)
        compacted = (await a.rt.store.state(KEY)).text
        await page.click("text=Save summary")
        await expect(page.get_by_role("alert")).to_contain_text(
            "Not saved: the summary changed while you were editing")
        await expect(page.locator("textarea[name=text]")).to_have_value(
            "## Launch\n- my second edit")
        await _shot(page, "inspector-edit-refused")
        assert (await a.rt.store.state(KEY)).text == compacted
        await page.click("text=Save summary")  # re-applied on the new version
        await expect(page.get_by_role("status")).to_have_text("Summary saved as a new version.")
        assert (await a.rt.store.state(KEY)).text == "## Launch\n- my second edit"

        # delete a fact
        await page.click(f"[aria-label='delete fact {drop.id}']")
        await expect(page.get_by_role("status")).to_have_text(f"Fact #{drop.id} deleted.")
        await expect(page.get_by_text("Budget is 40k EUR")).to_have_count(0)
        await expect(page.get_by_text("The launch owner is Dana")).to_be_visible()
        await _shot(page, "inspector-fact-deleted")
        assert [f.id for f in await a.rt.store.list_facts(KEY)] == [keep.id]
