"""The memory inspector over HTTP: login (wrong token 401, cookie flags, no secret on any
page), CSRF on every change (403), escaping of hostile channel names, summaries and turns,
and each action — summary edit with the compaction's version check, fact and turn delete,
reset, compaction — with the operator's address logged."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from bot.messages import IncomingMessage
from memory.models import ChannelKey
from tests.harness.admin import TOKEN, Admin, admin, csrf_of, fill, ref
from tests.harness.chat import ask

KEY = ChannelKey("discord", "g1", "general")
XSS = "<script>alert('x')</script>"
IMG = '<img src=x onerror="alert(1)">'


async def _logged_in(a: Admin) -> str:
    r = await a.login()
    assert r.status == 303
    return csrf_of(await a.page(KEY))


async def _post(a: Admin, action: str, **form: str) -> tuple[int, str]:
    async with a.http.post(f"{a.url}/inspector/channel/{action}", data=form,
                           allow_redirects=False) as r:
        return r.status, await r.text()


async def test_wrong_token_is_401_and_the_right_one_sets_a_strict_cookie(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 3)
        r = await a.login("wrong-token-wrong-token")
        assert r.status == 401 and "Wrong token" in await r.text()
        assert "gistbot_admin" not in {c.key for c in a.http.cookie_jar}
        async with a.http.get(f"{a.url}/inspector/", allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/inspector/login"
        r = await a.login()
        assert r.status == 303
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        async with a.http.get(f"{a.url}/inspector/") as r:
            listing = await r.text()
        page = await a.page(KEY)
        for html in (listing, page):
            assert TOKEN not in html  # no secret in any page
        assert "general" in listing and "discord" in listing


async def test_logins_are_throttled_per_address(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        statuses = [(await a.login(f"nope-{i}-nope-nope-nope")).status for i in range(11)]
        assert statuses[:10] == [401] * 10 and statuses[10] == 429
        assert (await a.login()).status == 429  # even the right token, until the minute ends


async def test_changes_without_csrf_are_403_and_change_nothing(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 3)
        fact = await a.rt.memory.remember(KEY, "the launch is on Friday")
        csrf = await _logged_in(a)
        version = (await a.rt.store.state(KEY)).version
        for action, form in [("summary", {"text": "hacked", "version": str(version)}),
                             ("fact/delete", {"fact": str(fact.id)}),
                             ("turn/delete", {"message": "m0"}),
                             ("reset", {"confirm": "yes"}), ("compact", {})]:
            status, _ = await _post(a, action, c=ref(KEY), **form)
            assert status == 403, action
            status, _ = await _post(a, action, c=ref(KEY), csrf=csrf[:-2] + "xx", **form)
            assert status == 403, action
        assert (await a.rt.store.state(KEY)).text == ""
        assert len(await a.rt.store.list_facts(KEY)) == 1
        assert len(await a.rt.store.turns(KEY)) == 3


async def test_changes_without_a_session_are_401(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 1)
        status, _ = await _post(a, "reset", c=ref(KEY), confirm="yes", csrf="anything")
        assert status == 401
        assert len(await a.rt.store.turns(KEY)) == 1


async def test_hostile_names_summaries_and_turns_are_escaped(tmp_path: Path) -> None:
    evil = ChannelKey("discord", "g1", f"chan{XSS}")
    async with admin(tmp_path) as a:
        await ask(a.rt, IncomingMessage(
            evil, "x1", "u1", IMG, f"hello {XSS} {IMG}", time.time()))
        await a.rt.memory.remember(evil, f"fact {XSS}")
        state = await a.rt.store.state(evil)
        assert await a.rt.store.edit_summary(evil, expected_version=state.version,
                                             text=f"summary {XSS}", now=1.0, author=IMG)
        await a.login()
        async with a.http.get(f"{a.url}/inspector/") as r:
            listing = await r.text()
        page = await a.page(evil)
        for html in (listing, page):
            assert "<script>" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
        assert "script-src" not in page  # no script anywhere: the CSP allows none


async def test_summary_edit_is_a_new_version_in_the_history(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 10)
        await a.rt.memory.wait_idle()
        before = await a.rt.store.state(KEY)
        assert before.text  # a compaction committed
        csrf = await _logged_in(a)
        with caplog.at_level(logging.WARNING, logger="gistbot.admin"):
            status, _ = await _post(a, "summary", c=ref(KEY), csrf=csrf,
                                    version=str(before.version), text="Operator's summary\n- Q3")
        assert status == 303
        after = await a.rt.store.state(KEY)
        assert after.text == "Operator's summary\n- Q3" and after.version == before.version + 1
        assert any("edit_summary from 127.0.0.1" in r.getMessage() for r in caplog.records)
        page = await a.page(KEY)
        assert "Summary saved as a new version." in page
        assert "by 127.0.0.1" in page and "folded nothing" in page
        assert "+ Operator&#39;s summary" in page  # the diff against the compaction's version
        history = await a.rt.store.summary_history_of(KEY)
        assert [v.source for v in history[:2]] == ["edit", "compaction"]


async def test_an_edit_racing_a_compaction_is_refused_and_kept(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 6)
        csrf = await _logged_in(a)
        loaded = (await a.rt.store.state(KEY)).version  # the version the operator's page shows
        assert await a.rt.memory.compact_now(KEY, force=True)  # lands while they type
        compacted = await a.rt.store.state(KEY)
        status, html = await _post(a, "summary", c=ref(KEY), csrf=csrf, version=str(loaded),
                                   text="my careful edit")
        assert status == 409
        assert "Not saved: the summary changed while you were editing" in html
        assert "my careful edit" in html  # kept in the box to re-apply
        assert f'name="version" value="{compacted.version}"' in html
        assert (await a.rt.store.state(KEY)).text == compacted.text  # the compaction stands
        status, _ = await _post(a, "summary", c=ref(KEY), csrf=csrf,
                                version=str(compacted.version), text="my careful edit")
        assert status == 303
        assert (await a.rt.store.state(KEY)).text == "my careful edit"


async def test_delete_fact_turn_reset_and_compact(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 6)
        kept = await a.rt.memory.remember(KEY, "keep me")
        gone = await a.rt.memory.remember(KEY, "delete me")
        csrf = await _logged_in(a)
        with caplog.at_level(logging.WARNING, logger="gistbot.admin"):
            assert (await _post(a, "fact/delete", c=ref(KEY), csrf=csrf,
                                fact=str(gone.id)))[0] == 303
            assert (await _post(a, "turn/delete", c=ref(KEY), csrf=csrf, message="m5"))[0] == 303
            assert (await _post(a, "compact", c=ref(KEY), csrf=csrf))[0] == 303
            await a.server.inspector.close()  # type: ignore[union-attr]
            assert (await a.rt.store.state(KEY)).folded_through > 0
            assert (await _post(a, "reset", c=ref(KEY), csrf=csrf))[0] == 303  # unconfirmed
            assert len(await a.rt.store.turns(KEY)) == 5
            page = await a.page(KEY)
            assert "tick the confirmation box" in page
            assert (await _post(a, "reset", c=ref(KEY), csrf=csrf, confirm="yes"))[0] == 303
        assert [f.id for f in await a.rt.store.list_facts(KEY)] == []
        assert await a.rt.store.turns(KEY) == []
        logged = " ".join(r.getMessage() for r in caplog.records)
        for action in ("delete_fact", "delete_turn", "compact", "reset"):
            assert f"admin {action} from 127.0.0.1 on discord:g1:general" in logged
        assert kept.id != gone.id


async def test_deleting_a_summarized_turn_is_refused(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 6)
        assert await a.rt.memory.compact_now(KEY, force=True)
        csrf = await _logged_in(a)
        await _post(a, "turn/delete", c=ref(KEY), csrf=csrf, message="m0")
        assert "already summarized" in await a.page(KEY)
        assert len(await a.rt.store.turns(KEY)) == 6


async def test_channel_page_shows_memory_search_and_plot(tmp_path: Path) -> None:
    async with admin(tmp_path) as a:
        await fill(a.rt, KEY, 16, mention_every=4)
        await a.rt.memory.wait_idle()
        await fill(a.rt, KEY, 1, start=100, text="the password reset for ORD-7781 is pending")
        await a.login()
        page = await a.page(KEY)
        assert "<svg" in page and "prompt memory tokens per reply" in page
        last = a.server.metrics.prompt_points(KEY)[-1]
        full = sum(t.tokens for t in await a.rt.store.turns(KEY) if t.seq <= last.seq)
        assert (f"4 replies; the last sent {last.prompt_tokens:,} memory tokens where the "
                f"full history was {full:,}") in page
        assert "ORD-7781" in page
        found = await a.page(KEY, q="ORD-7781")
        assert "the password reset for ORD-7781" in found
        assert "<pre>message 3 about" in page and "<pre>message 3 about" not in found
        async with a.http.get(f"{a.url}/inspector/", params={"q": "gener"}) as r:
            assert "general" in await r.text()
        async with a.http.get(f"{a.url}/inspector/", params={"q": "zzz"}) as r:
            assert "no channels" in await r.text()
        async with a.http.get(f"{a.url}/inspector/channel", params={"c": "bad"}) as r:
            assert r.status == 400
