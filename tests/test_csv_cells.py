"""Every CSV the service writes neutralises cells a spreadsheet would run (emissions/csvfile.py)."""
from __future__ import annotations

import csv
import io

import pytest

from emissions import csvfile

HOSTILE = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r",
           "  =1+1", "\tx", "-"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_cell_a_spreadsheet_would_run_is_written_as_text(text):
    assert csvfile.safe_cell(text) == "'" + text


@pytest.mark.parametrize("text, written", [
    ("\n=1+1", "'\n'=1+1"), (" \n @SUM(A1)", "' \n' @SUM(A1)"), ("\r=1", "'\r'=1"),
    ("PO-7\r=cmd|' /C calc'!A0", "PO-7\r'=cmd|' /C calc'!A0"), ("a\n-1\r\n+2", "a\n'-1\r\n'+2"),
    ("a\r\n \t@x", "a\r\n' \t@x"), ("line\nnext-line", "line\nnext-line"),
])
def test_a_line_inside_a_cell_that_would_start_a_formula_is_written_as_text(text, written):
    assert csvfile.safe_cell(text) == written


def test_a_row_holding_a_carriage_return_is_one_row_of_quoted_cells():
    out = io.StringIO()
    writer = csvfile.Writer(out, numeric_columns=[1])
    writer.writerow(["PO-7\r=cmd|' /C calc'!A0", "1.5", "plain"])
    writer.writerow(["a\tb", "2", "c\nd"])
    assert out.getvalue() == '"PO-7\r\'=cmd|\' /C calc\'!A0","1.5","plain"\na\tb,2,"c\nd"\n'
    assert list(csv.reader(io.StringIO(out.getvalue(), newline=""))) == [
        ["PO-7\r'=cmd|' /C calc'!A0", "1.5", "plain"], ["a\tb", "2", "c\nd"]]


@pytest.mark.parametrize("text", ["", "plain", "a=b", "1-2", " spaced", "ship-1", "'=already quoted"])
def test_a_harmless_cell_is_written_as_it_is(text):
    assert csvfile.safe_cell(text) == text


def test_a_numeric_column_keeps_numbers_and_neutralises_anything_else():
    out = io.StringIO()
    writer = csvfile.Writer(out, numeric_columns=[1])
    writer.writerow(["-1.5", "-1.5"])
    writer.writerow(["x", "-1+cmd"])
    writer.writerow([None, "1e-3"])
    assert list(csv.reader(io.StringIO(out.getvalue()))) == [["'-1.5", "-1.5"], ["x", "'-1+cmd"], ["", "1e-3"]]
