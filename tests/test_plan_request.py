"""mss_aggregator.plan, the application layer of ``mss plan`` (issue 46, item 1): the library
speaks in its own terms (no click, no rich, no --flag in an error or a note), the command maps
its options onto a PlanRequest and words the library's errors with its flags.  About 3 s."""
import subprocess
import sys

import pytest
from click.testing import CliRunner

from mss_aggregator.plan import (Hardware, Limits, PlanRequest, Question, Reporting, RequestError, Shuffling,
                                 check, plan)
from mss_cli.main import main
from mss_protocol import lorawan

EU868_DR0 = lorawan.parse_link("lorawan:eu868:0")


def test_the_application_layer_loads_no_click_and_no_rich():
    code = ("import sys, mss_aggregator.plan, mss_aggregator.audit, mss_aggregator.deploy.switch; "
            "print(sorted(m for m in ('click', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("request_, field, other", [
    (PlanRequest(k=16, epsilon=2.0, shuffle=Shuffling(n=100, central_epsilon=1.0)), "epsilon",
     "shuffle.central_epsilon"),
    (PlanRequest(k=16), "epsilon", None),
    (PlanRequest(k=16, epsilon=2.0, protocol="olh", shuffle=Shuffling(n=100)), "protocol", None),
    (PlanRequest(k=16, epsilon=2.0, question=Question(detect=0.1, target_se=0.1)), "question.target_se",
     "question.detect"),
    (PlanRequest(k=16, epsilon=2.0, reporting=Reporting(memoize=False, budget=(4.0, 30))), "reporting.budget",
     "reporting.memoize"),
    (PlanRequest(k=16, epsilon=2.0, protocol="ss", reporting=Reporting(irr_epsilon=1.0)), "reporting.irr_epsilon",
     None),
    (PlanRequest(k=16, epsilon=2.0, hardware=Hardware(battery_mah=2000.0)), "hardware.battery_mah", "hardware.link"),
    (PlanRequest(k=16, epsilon=2.0, hardware=Hardware(link=EU868_DR0, board="rp2350")), "hardware.board", None),
])
def test_a_refused_request_names_its_fields_not_flags(request_, field, other):
    with pytest.raises(RequestError) as caught:
        check(request_)
    exc = caught.value
    assert exc.field == field and other in (exc.needs, exc.excludes)
    assert "--" not in str(exc)


def test_the_budget_and_the_link_period_are_refused_in_the_librarys_terms():
    with pytest.raises(RequestError, match="below one fresh draw") as caught:
        plan(PlanRequest(k=12, epsilon=2.0, reporting=Reporting(budget=(1.0, 30))))
    assert caught.value.field == "reporting.budget" and "--" not in str(caught.value)
    with pytest.raises(RequestError, match="shorter than") as caught:
        plan(PlanRequest(k=12, epsilon=2.0, hardware=Hardware(link=EU868_DR0, period_s=5)))
    assert caught.value.field == "hardware.period_s" and "--" not in str(caught.value)


def test_a_plans_notes_name_no_flag_and_the_command_words_them_with_its_own():
    p = plan(PlanRequest(k=12, epsilon=2.0, limits=Limits(max_bytes=40),
                         hardware=Hardware(link=EU868_DR0)))
    assert p.frame == "compact" and p.max_bytes == 40 and p.to_dict()["link"] == "lorawan:eu868:0"
    assert [n.kind for n in p.notes][:1] == ["payload"] and not any("--" in n.text for n in p.notes)
    out = CliRunner().invoke(main, ["plan", "--k", "12", "--epsilon", "2", "--link", "lorawan:eu868:0",
                                    "--max-bytes", "40"])
    assert out.exit_code == 0 and "note: --max-bytes 40 and lorawan:eu868:0's 51-byte payload" in out.output


def test_the_command_names_the_flags_of_a_refused_request():
    out = CliRunner().invoke(main, ["plan", "--k", "12", "--epsilon", "2", "--battery", "2000"])
    assert out.exit_code == 2 and "--battery" in out.output and "needs --link lorawan:REGION:DR" in out.output
