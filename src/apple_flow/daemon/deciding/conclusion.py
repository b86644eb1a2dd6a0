"""What a turn that has run means: its reply (a task's with its check and the offer to escalate; the files to send)
and what to record. Deciding only, like the orchestrator: it returns a ``FinishedTurn`` the runtime records."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from apple_flow.connectors.base import CheckReport, Exchange, Status, TurnOutcome
from apple_flow.daemon.deciding import failures
from apple_flow.daemon.deciding.approvals import Approvals
from apple_flow.daemon.deciding.commands import Kind
from apple_flow.daemon.deciding.decisions import Turn
from apple_flow.daemon.deciding.escalation import Escalation
from apple_flow.daemon.deciding.files_to_send import check_all, note, take_attach_lines
from apple_flow.daemon.deciding.reports import clip
from apple_flow.daemon.store import FinishedTurn


@dataclass(frozen=True)
class ReplyFileLimits:
    """How big a file the agent may send back, and how many a reply (0: sending files is turned off)."""

    max_bytes: int = 25_000_000
    per_reply: int = 5


class Conclusion:
    def __init__(
        self,
        approvals: Approvals,
        connector_name: str,
        run_links: str | None = None,
        files: ReplyFileLimits = ReplyFileLimits(),
        escalation: Escalation | None = None,
    ) -> None:
        self._approvals = approvals
        self._connector_name = connector_name
        self._run_links = run_links  # the web page's base URL: replies then end with a link to their run
        self._files = files  # the files the agent may send back (ATTACH: lines)
        self._escalation = escalation  # None: failed tasks are not offered elsewhere

    def conclude(
        self, turn: Turn, run_id: str, outcome: TurnOutcome | Exception, stop: str | None, keep_exchange: bool
    ) -> FinishedTurn:
        """What a turn that has run means: its reply and what to record. ``outcome`` is the connector's, or the
        exception it raised (a bug: the sender hears about it, the daemon goes on). ``stop`` says whether the
        turn was stopped from outside: None (it was not), "" (cancelled; the sender was told already), or the
        reply to send instead (it ran too long). ``keep_exchange``: the conversation is kept (the connector
        wants earlier exchanges). With the web page's base URL set, the reply ends with its run page's address.
        The files the answer names are checked against the turn's workspace: those that may go are the finished
        turn's ``files``, and the reply ends saying which are being sent and which not, and why."""
        finished, named = self._conclude(turn, run_id, outcome, stop, keep_exchange)
        if turn.kind in (Kind.APPROVE, Kind.ESCALATE) and turn.approval is not None and finished.reply:
            finished = replace(finished, reply=self._task_reply(turn, run_id, finished, outcome))
        finished = replace(finished, backend=self._backend(outcome, turn.connector))
        if self._run_links and finished.reply:
            finished = replace(finished, reply=f"{finished.reply}\n\n{self._run_links}/runs/{run_id}")
        return self._check_files(finished, named, turn.workspace)

    def _check_files(self, finished: FinishedTurn, named: tuple[str, ...], workspace: Path) -> FinishedTurn:
        """``finished`` with the files that may go (inside the workspace, within the limits) and its reply saying
        which are being sent and which not, and why."""
        if not named or finished.reply is None:
            return finished
        outgoing = check_all(named, workspace, self._files.max_bytes, self._files.per_reply)
        going = tuple((item.shown, str(item.path)) for item in outgoing if item.path is not None)
        return replace(finished, reply=f"{finished.reply}\n\n{note(outgoing)}", files=going)

    def _backend(self, outcome: TurnOutcome | Exception, connector: str | None = None) -> str:
        """What answered, for ``usage``: the connector, with the backend and model the agent reported."""
        label = connector or self._connector_name
        if isinstance(outcome, TurnOutcome):
            label += f":{outcome.backend}" if outcome.backend else ""
            label += f" ({outcome.model})" if outcome.model else ""
        return label

    def _conclude(
        self, turn: Turn, run_id: str, outcome: TurnOutcome | Exception, stop: str | None, keep_exchange: bool
    ) -> tuple[FinishedTurn, tuple[str, ...]]:
        """What the turn means, and the files its answer names (checked by ``conclude``)."""
        if isinstance(outcome, Exception):
            reply = failures.explain_exception(outcome)
            return FinishedTurn(reply, "failed", reply), ()
        result = outcome.as_text()
        if stop:
            return FinishedTurn(stop, "failed", stop, outcome), ()
        if stop is not None:
            return FinishedTurn(None, "cancelled", result, outcome), ()
        if not outcome.answered:
            return FinishedTurn(failures.explain(outcome), "failed", result, outcome), ()
        exchange = Exchange(turn.prompt, outcome.text) if keep_exchange else None
        if failures.is_blocker(result):  # passed on as is: no approval for a plan that is a question
            return FinishedTurn(result.strip(), "blocked", result, outcome, exchange), ()
        if turn.kind is Kind.TASK:
            approval = self._approvals.create(turn.sender, turn.request, result.strip(), str(turn.workspace))
            reply = (
                f"Plan ({approval.id}, in {turn.workspace}):\n{result.strip()}\n\n"
                f"Reply `approve {approval.id}` to run it (optionally with notes), or `deny {approval.id}`; or like "
                "this message to approve it, dislike it to deny. "
                f"Expires in {self._approvals.ttl_minutes} minutes."
            )
            return FinishedTurn(reply, "done", result, outcome, exchange, approval), ()
        reply, files = self._files_to_send(turn, result.strip(), outcome)
        return FinishedTurn(reply, "done", result, outcome, exchange), files

    def _task_reply(self, turn: Turn, run_id: str, finished: FinishedTurn, outcome: TurnOutcome | Exception) -> str:
        """An approved (or escalated) task's reply: what happened, the agent's answer, and a last line on its check;
        a failed apple-code run ends with the offer to escalate it, where one is set up."""
        assert turn.approval is not None and finished.reply is not None
        ids = f"{turn.approval.id}, {run_id}"
        where = f" on {turn.connector}" if turn.kind is Kind.ESCALATE and turn.connector else ""
        answered = outcome if isinstance(outcome, TurnOutcome) else None
        check = answered.check if answered is not None else None
        if finished.run_state == "done":
            head = (f"Done ({ids}{where}):" if turn.kind is Kind.APPROVE
                    else f"Escalated {turn.escalates}{where} ({ids}):")
            text = f"{head}\n{finished.reply}"
        elif answered is not None and answered.status is Status.CHECK_FAILED:
            rounds = f" after {_rounds(check.rounds)}" if check is not None else ""
            partial = f"\n{answered.text}" if answered.text else ""
            text = f"Not done ({ids}{where}): the check still fails{rounds}.{partial}"
        else:
            text = f"Not done ({ids}{where}): {finished.reply}" if finished.run_state == "failed" else finished.reply
        line = self._check_line(turn, check, finished.run_state)
        if line:
            text += f"\n\n{line}"
        if self._escalation is not None and turn.kind is Kind.APPROVE and turn.connector is None \
                and self._escalation.stuck(finished.run_state, answered.status if answered is not None else None):
            text += f"\n{self._escalation.offer(run_id)}"
        return text

    def _check_line(self, turn: Turn, check: CheckReport | None, state: str) -> str:
        """The task reply's last line on its check: passed, or failed with its first failing line."""
        if state not in ("done", "failed"):
            return ""
        if check is not None and not check.ran:  # the run ended before a final answer to check
            return f"Check not run: `{check.command}`."
        if check is not None:
            if check.passed:
                after = f" (after {_rounds(check.rounds)})" if check.rounds else ""
                return f"Check passed: `{check.command}`{after}."
            failing = check.failing_line()
            return f"Check failed: `{check.command}`" + (f": {clip(failing, 200)}" if failing else ".")
        if state != "done" or turn.verify is None:  # no check for the workspace: `status` says why
            return ""
        agent = turn.connector or self._connector_name
        return f"Not checked by apple-flow: {agent} was asked to run `{turn.verify}` itself."

    def _files_to_send(self, turn: Turn, answer: str, outcome: TurnOutcome) -> tuple[str, tuple[str, ...]]:
        """The answer without its ``ATTACH:`` lines, and the files to send: those lines' files, or, when the user
        asked for a file and the answer names none, the files the agent changed."""
        text, named = take_attach_lines(answer)
        if self._files.per_reply <= 0:
            return answer, ()
        if not named and turn.wants_file:
            named = list(outcome.files_changed)
        return text or "Here you are.", tuple(named)


def _rounds(n: int) -> str:
    return f"{n} repair round" + ("" if n == 1 else "s")
