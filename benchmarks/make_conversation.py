"""Generate ``benchmarks/data/conversation.jsonl`` and ``probes.jsonl`` (run once, committed).

A 2,000-turn team channel: eight speakers, several interleaved topics (a release, an
incident, a customer escalation, an office move, hiring, cloud costs, chit-chat, a little
Korean), message lengths from one-word reactions to pasted logs, and 36 planted identifiers
(tickets, orders, URLs, e-mails, phone numbers, amounts, dates, code names, commits), each
with a probe question whose exact answer is the identifier. Deterministic: a fixed seed, no
clock, so ``python -m benchmarks.make_conversation`` always writes the same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from memory.identifiers import extract_identifiers

__all__ = ["FACTS", "generate", "main"]

DATA = Path(__file__).parent / "data"
SEED = 20240607
TURNS = 2000
PEOPLE = [("U01", "Dana"), ("U02", "Eli"), ("U03", "Priya"), ("U04", "Marco"),
          ("U05", "Sofia"), ("U06", "Kenji"), ("U07", "Hana"), ("U08", "Tom")]
TOPICS = ["release", "incident", "customer", "office", "hiring", "costs"]

# (speaker, topic, statement, identifier, probe question)
FACTS: list[tuple[str, str, str, str, str]] = [
    ("Priya", "release", "Release branch is cut, the tracking ticket is REL-2291.", "REL-2291", "What is the tracking ticket for the release branch?"),  # noqa: E501
    ("Eli", "incident", "Opened OPS-4821 for the staging DB password rotation, please don't touch the creds until it's closed.", "OPS-4821", "Which ticket covers the staging DB password rotation?"),  # noqa: E501
    ("Sofia", "customer", "The Brightline escalation is about order ORD-77812, they were charged twice.", "ORD-77812", "Which order is the Brightline escalation about?"),  # noqa: E501
    ("Marco", "office", "New office address is confirmed, the landlord's number is +1-415-555-0142 if anything breaks.", "+1-415-555-0142", "What is the landlord's phone number?"),  # noqa: E501
    ("Dana", "hiring", "Send candidate packets to hiring-panel@northwind.dev from now on.", "hiring-panel@northwind.dev", "Where should candidate packets be sent?"),  # noqa: E501
    ("Kenji", "costs", "Last month's cloud bill was $48,730, mostly egress.", "48,730", "How much was last month's cloud bill, in dollars?"),  # noqa: E501
    ("Priya", "release", "Code name for the new checkout flow is `bluejay`, use it in flag names.", "bluejay", "What is the code name of the new checkout flow?"),  # noqa: E501
    ("Eli", "incident", "Postmortem doc is at https://wiki.northwind.dev/pm/2291-db-latency please add your timeline notes.", "https://wiki.northwind.dev/pm/2291-db-latency", "Where is the postmortem doc for the DB latency incident?"),  # noqa: E501
    ("Tom", "release", "The fix for the cart race landed in commit 9f3c2a1.", "9f3c2a1", "Which commit fixed the cart race?"),  # noqa: E501
    ("Sofia", "customer", "Brightline's refund was approved, reference RF-30417.", "RF-30417", "What is the reference of Brightline's refund?"),  # noqa: E501
    ("Marco", "office", "Move day is 2024-11-18, movers arrive at 8.", "2024-11-18", "On which date is the office move?"),  # noqa: E501
    ("Dana", "hiring", "Offer for the SRE role is approved at 162,000 base.", "162,000", "What base salary was approved for the SRE offer?"),  # noqa: E501
    ("Kenji", "costs", "I reserved instances under PO-2024-0042, finance has the paperwork.", "PO-2024-0042", "Which purchase order covers the reserved instances?"),  # noqa: E501
    ("Hana", "office", "회의실 예약 번호는 RM-3307 입니다. 목요일 오후에 쓰세요.", "RM-3307", "What is the meeting room booking number Hana gave?"),  # noqa: E501
    ("Eli", "incident", "Pager escalation goes to oncall-primary@northwind.dev tonight.", "oncall-primary@northwind.dev", "Which address does the pager escalation go to tonight?"),  # noqa: E501
    ("Priya", "release", "We are shipping version 2.14.3 on Thursday, not 2.15.", "2.14.3", "Which version ships on Thursday?"),  # noqa: E501
    ("Sofia", "customer", "Acme's support case is CASE-55190, they want an update by Friday.", "CASE-55190", "What is Acme's support case number?"),  # noqa: E501
    ("Tom", "costs", "Staging DB moved to the db.r6g.xlarge class, saves about $1,840 a month.", "1,840", "How much per month does moving the staging DB save?"),  # noqa: E501
    ("Marco", "office", "Wifi for the new floor: network NW-Guest-5G, the voucher code is 774-213-908.", "774-213-908", "What is the wifi voucher code for the new floor?"),  # noqa: E501
    ("Dana", "hiring", "Panel for Lena's interview is on 2024-12-03, calendar invite is out.", "2024-12-03", "When is Lena's interview panel?"),  # noqa: E501
    ("Kenji", "incident", "The bad deploy was build 48213, rolling back to 48190.", "48213", "Which build was the bad deploy?"),  # noqa: E501
    ("Priya", "release", "Feature flag key is `checkout.bluejay.rollout`, default off.", "checkout.bluejay.rollout", "What is the feature flag key for the rollout?"),  # noqa: E501
    ("Sofia", "customer", "Brightline's account manager is reachable at j.ortega@brightline.io.", "j.ortega@brightline.io", "How do we reach Brightline's account manager?"),  # noqa: E501
    ("Eli", "incident", "Status page incident is https://status.northwind.dev/incidents/8842 keep it updated.", "https://status.northwind.dev/incidents/8842", "What is the status page URL of the incident?"),  # noqa: E501
    ("Marco", "office", "Badge requests go through ticket FAC-1187.", "FAC-1187", "Which ticket handles badge requests?"),  # noqa: E501
    ("Tom", "release", "Load test target is 3,500 requests per second sustained.", "3,500", "What is the sustained load test target in requests per second?"),  # noqa: E501
    ("Dana", "hiring", "Recruiter's direct line is +44-20-7946-0321.", "+44-20-7946-0321", "What is the recruiter's direct line?"),  # noqa: E501
    ("Kenji", "costs", "Budget cap for Q1 infra is $210,000, hard limit.", "210,000", "What is the Q1 infra budget cap?"),  # noqa: E501
    ("Priya", "release", "Rollback runbook lives in `runbooks/checkout-rollback.md`.", "runbooks/checkout-rollback.md", "Where does the rollback runbook live?"),  # noqa: E501
    ("Sofia", "customer", "Acme's contract renewal is INV-90211, due 2025-01-31.", "INV-90211", "What is the invoice number of Acme's contract renewal?"),  # noqa: E501
    ("Eli", "incident", "Root cause: connection pool max was 200, we set it to 800.", "800", "What was the connection pool max set to?"),  # noqa: E501
    ("Hana", "hiring", "면접 피드백 양식은 FORM-4410 으로 제출해 주세요.", "FORM-4410", "Which form is used for interview feedback?"),  # noqa: E501
    ("Marco", "office", "Parking permits are under account PK-66019 with the garage.", "PK-66019", "Under which account are the parking permits?"),  # noqa: E501
    ("Tom", "costs", "The CDN contract is quote QT-7720, valid until March.", "QT-7720", "What is the CDN contract quote id?"),  # noqa: E501
    ("Kenji", "release", "Canary is pinned to node pool np-canary-07 for the rollout.", "np-canary-07", "Which node pool is the canary pinned to?"),  # noqa: E501
    ("Dana", "customer", "Escalation owner for Acme is now tracked in ESC-3391.", "ESC-3391", "Which ticket tracks the Acme escalation owner?"),  # noqa: E501
]

COMPONENTS = ["checkout", "search", "billing", "auth", "notifications", "the API gateway"]
REACTIONS = ["+1", "lol", "nice", "thanks!", "sounds good", "on it", "agreed", "ok",
             "makes sense", "yep", "haha same", "👍", "ty", "will do", "hmm", "good call",
             "sgtm", "oh no", "ship it", "brb", "interesting", "nope", "same here", "done"]
TOPIC_LINES: dict[str, list[str]] = {
    "release": ["Is {comp} ready for the freeze or do we need another day?",
                "QA found {k} regressions in {comp}, two of them look cosmetic.",
                "I'd rather slip a day than ship {comp} half-tested.",
                "Release notes draft is in the doc, please review the {comp} section.",
                "The {comp} flag is still off in prod, we flip it after the canary looks clean.",
                "Can someone pair with me on the {comp} migration this afternoon?",
                "Decided: we freeze on Wednesday and only take blocker fixes after that.",
                "The {comp} tests are flaky on CI again, I reran them twice and they passed.",
                "Do we have a rollback plan for {comp} if the canary goes sideways?",
                "Docs for {comp} are out of date, I'll fix them before we announce."],
    "incident": ["p99 on {comp} went from {ms}ms to {ms2}ms around the deploy.",
                 "Error rate is back under {k} percent, still watching.",
                 "I'm rolling back {comp} now, give me five minutes.",
                 "Looks like connection churn, the pool is saturated during peaks.",
                 "Who is incident commander? I can take comms.",
                 "Dashboards show {comp} recovering, latency is normal again.",
                 "Let's keep the war room open until the backlog drains.",
                 "Queue depth on {comp} peaked at {ms2}, it is draining slowly now.",
                 "I think we should add an alert on pool saturation so this pages earlier.",
                 "Customer-facing impact was about {k}0 minutes, mostly slow checkouts."],
    "customer": ["Brightline pinged again, they want an ETA on the double charge.",
                 "I told Acme we'd have an answer by end of week.",
                 "Their admin can't log in since the {comp} change, can someone check?",
                 "Refund policy says we can do it without finance sign-off under a limit.",
                 "Customer is calm now, but they asked for a call tomorrow.",
                 "Can we get a credit note out today? They are a big account.",
                 "Acme says exports from {comp} are missing rows since Tuesday.",
                 "I'll draft the apology email, can someone double-check the numbers?"],
    "office": ["The new floor has way more meeting rooms, finally.",
               "Please pack your desks by Friday, labels are at reception.",
               "Movers need a list of monitors, I'll send a form.",
               "Is there parking near the new place or should we take the train?",
               "Kitchen will be ready a week after the move, bring mugs.",
               "IT will set up the desks on the weekend, leave your laptops at home.",
               "The old office keys go back to Marco before the end of the month."],
    "hiring": ["Lena's take-home was really strong, clean tests.",
               "We have {k} candidates in the pipeline for the backend role.",
               "Can someone shadow the system design interview on Tuesday?",
               "I'd like one more reference check before we decide.",
               "The job post for the SRE role got a lot of applicants this week.",
               "Scorecards are due within 24 hours of the interview, please.",
               "The candidate asked about remote work, what do we tell them?"],
    "costs": ["Egress on {comp} is our biggest line item again.",
              "We could cut the log retention from {k}0 days to 14 and save a lot.",
              "Reserved instances would pay off within {k} months.",
              "Who owns the old analytics cluster? It costs money and nobody uses it.",
              "Let's review the bill together on Monday.",
              "The {comp} autoscaler keeps {k} idle nodes overnight, that adds up.",
              "Finance wants a forecast for next quarter by the end of the month."],
    "chat": ["Anyone up for lunch at the noodle place?", "Coffee machine is broken again.",
             "Happy Friday everyone!", "Did anyone watch the match yesterday?",
             "My kid's school has a snow day, I'll be online later.",
             "Who took the good chair from the corner desk?", "Pizza is here, come grab some.",
             "I'm out tomorrow, dentist.", "오늘 점심 같이 드실 분?", "주말 잘 보내세요!"],
}
LOG = ("{ts} ERROR {comp}: upstream request failed status=503 retry={k}\n"
       "{ts} WARN  {comp}: pool exhausted waiting=41 active=200 idle=0\n"
       "{ts} INFO  {comp}: circuit breaker open for 30s\n")


def _fill(rng: random.Random, template: str) -> str:
    ms = rng.choice([90, 120, 180, 240, 310])
    return template.format(comp=rng.choice(COMPONENTS), k=rng.randint(2, 9), ms=ms,
                           ms2=ms * rng.randint(3, 6),
                           ts=f"12:{rng.randint(10, 59)}:0{rng.randint(0, 9)}")


def _message(rng: random.Random, topic: str) -> str:
    """One message of realistic length: reactions, a sentence or two, updates, pasted logs."""
    roll = rng.random()
    lines = TOPIC_LINES[topic]
    if roll < 0.33:
        return rng.choice(REACTIONS)
    if roll < 0.80:
        picked = rng.sample(lines, k=rng.choice([1, 1, 2, 2, 3]))
        return " ".join(_fill(rng, line) for line in picked)
    if roll < 0.96 or topic == "chat":
        body = " ".join(_fill(rng, line) for line in rng.sample(lines, k=rng.randint(3, 5)))
        return body if topic == "chat" else f"Quick update on {topic}: {body}"
    if topic == "incident":
        log = "".join(_fill(rng, LOG) for _ in range(rng.randint(2, 4)))
        return f"Here's what I'm seeing:\n```\n{log}```"
    parts = [_fill(rng, line) for line in rng.sample(lines, k=min(5, len(lines)))]
    return "Long status, sorry: " + " ".join(parts) + " Shout if I missed anything."


def _fact_turns() -> dict[int, int]:
    """Turn index → fact index: facts spread over the conversation, none in the last 50."""
    step = (TURNS - 100) // len(FACTS)
    return {30 + i * step: i for i in range(len(FACTS))}


def generate() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """(turns, probes), both deterministic."""
    rng = random.Random(SEED)
    ids = dict((name, uid) for uid, name in PEOPLE)
    planted = _fact_turns()
    turns: list[dict[str, object]] = []
    probes: list[dict[str, object]] = []
    topic, speaker = "release", "Dana"
    for i in range(1, TURNS + 1):
        if rng.random() < 0.04:
            topic = rng.choice(TOPICS)
        current = "chat" if rng.random() < 0.15 else topic
        if i in planted:
            who, current, text, value, question = FACTS[planted[i]]
            if value not in extract_identifiers(text):
                raise AssertionError(f"planted {value!r} is not an identifier in {text!r}")
            probes.append({"value": value, "turn": i, "speaker": who, "question": question})
        else:
            if rng.random() < 0.6:  # conversations have runs: the last speaker often goes on
                speaker = rng.choice([name for _, name in PEOPLE if name != speaker])
            who, text = speaker, _message(rng, current)
            if who == "Hana" and current == "chat" and rng.random() < 0.5:
                text = rng.choice(TOPIC_LINES["chat"][-2:])
        speaker = who
        turns.append({"i": i, "author_id": ids[who], "author": who, "topic": current,
                      "text": text})
    return turns, probes


def main() -> None:
    """Write both files under ``benchmarks/data/``."""
    turns, probes = generate()
    DATA.mkdir(exist_ok=True)
    for name, rows in (("conversation.jsonl", turns), ("probes.jsonl", probes)):
        with open(DATA / name, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    print(f"wrote {len(turns)} turns and {len(probes)} probes to {DATA}")


if __name__ == "__main__":
    main()
