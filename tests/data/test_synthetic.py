"""Synthetic tasks: date formats against hand-written strings and an independent parser, determinism, split
disjointness, reversal length split, registry errors, speed."""

import datetime
import re
import time

import pytest

from attnjax.data import synthetic
from attnjax.data.synthetic import DATE_FORMATS, DATE_MAX, DATE_MIN, expand_two_digit_year, format_date, make_examples

WEDNESDAY_2018_05_09 = {
    "weekday_d_month_yyyy": "Wednesday, 9 May 2018",
    "dd.mm.yy": "09.05.18",
    "dd.mm.yyyy": "09.05.2018",
    "month_d_yyyy_lower": "may 9 2018",
    "d_month_yyyy": "9 May 2018",
    "month_d_comma_yyyy": "May 9, 2018",
    "yyyy/mm/dd": "2018/05/09",
    "d/m/yyyy": "9/5/2018",
    "wkd_d_mon_yy": "Wed 9 May 18",
    "dd_MON_yyyy": "09 MAY 2018",
    "the_dth_of_month_yyyy": "the 9th of May 2018",
    "month_dth_comma_yyyy": "May 9th, 2018",
    "dd-mon-yyyy": "09-May-2018",
    "yyyymmdd": "20180509",
    "weekday_month_d_comma_yyyy": "Wednesday, May 9, 2018",
    "d_mon_apostrophe_yy": "9 May '18",
}

# May abbreviates to itself; September shows the abbreviations and "rd".
SATURDAY_1961_09_23 = {
    "weekday_d_month_yyyy": "Saturday, 23 September 1961",
    "dd.mm.yy": "23.09.61",
    "dd.mm.yyyy": "23.09.1961",
    "month_d_yyyy_lower": "september 23 1961",
    "d_month_yyyy": "23 September 1961",
    "month_d_comma_yyyy": "September 23, 1961",
    "yyyy/mm/dd": "1961/09/23",
    "d/m/yyyy": "23/9/1961",
    "wkd_d_mon_yy": "Sat 23 Sep 61",
    "dd_MON_yyyy": "23 SEP 1961",
    "the_dth_of_month_yyyy": "the 23rd of September 1961",
    "month_dth_comma_yyyy": "September 23rd, 1961",
    "dd-mon-yyyy": "23-Sep-1961",
    "yyyymmdd": "19610923",
    "weekday_month_d_comma_yyyy": "Saturday, September 23, 1961",
    "d_mon_apostrophe_yy": "23 Sep '61",
}

# An independent parser per format (regex + English names), written without the module's formatters.
_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_W, _D, _M, _Y = r"(?P<w>[A-Za-z]+)", r"(?P<d>\d{1,2})", r"(?P<m>[A-Za-z]+|\d{1,2})", r"(?P<y>\d{4}|\d{2})"
_PATTERNS = {
    "weekday_d_month_yyyy": f"{_W}, {_D} {_M} {_Y}",
    "dd.mm.yy": r"(?P<d>\d\d)\.(?P<m>\d\d)\.(?P<y>\d\d)",
    "dd.mm.yyyy": r"(?P<d>\d\d)\.(?P<m>\d\d)\.(?P<y>\d{4})",
    "month_d_yyyy_lower": f"(?P<m>[a-z]+) {_D} (?P<y>\\d{{4}})",
    "d_month_yyyy": f"{_D} {_M} (?P<y>\\d{{4}})",
    "month_d_comma_yyyy": f"{_M} {_D}, (?P<y>\\d{{4}})",
    "yyyy/mm/dd": r"(?P<y>\d{4})/(?P<m>\d\d)/(?P<d>\d\d)",
    "d/m/yyyy": r"(?P<d>\d{1,2})/(?P<m>\d{1,2})/(?P<y>\d{4})",
    "wkd_d_mon_yy": f"{_W} {_D} {_M} (?P<y>\\d\\d)",
    "dd_MON_yyyy": r"(?P<d>\d\d) (?P<m>[A-Z]{3}) (?P<y>\d{4})",
    "the_dth_of_month_yyyy": f"the {_D}(?:st|nd|rd|th) of {_M} (?P<y>\\d{{4}})",
    "month_dth_comma_yyyy": f"{_M} {_D}(?:st|nd|rd|th), (?P<y>\\d{{4}})",
    "dd-mon-yyyy": r"(?P<d>\d\d)-(?P<m>[A-Za-z]{3})-(?P<y>\d{4})",
    "yyyymmdd": r"(?P<y>\d{4})(?P<m>\d\d)(?P<d>\d\d)",
    "weekday_month_d_comma_yyyy": f"{_W}, {_M} {_D}, (?P<y>\\d{{4}})",
    "d_mon_apostrophe_yy": f"{_D} {_M} '(?P<y>\\d\\d)",
}


def _parse(source: str, fmt: str) -> datetime.date:
  match = re.fullmatch(_PATTERNS[fmt], source)
  assert match, (source, fmt)
  m = match["m"]
  month = int(m) if m.isdigit() else next(i for i, name in enumerate(_MONTHS, 1) if name.startswith(m.lower()))
  y = match["y"]
  year = int(y) if len(y) == 4 else (2000 + int(y) if int(y) < 50 else 1900 + int(y))
  d = datetime.date(year, month, int(match["d"]))
  if "w" in match.groupdict():
    assert _WEEKDAYS[d.weekday()].startswith(match["w"].lower()), (source, d)
  return d


# -------------------------------------------------------------------------------------------------------- formats


def test_at_least_ten_formats_all_covered_by_the_hand_written_cases():
  assert len(DATE_FORMATS) >= 10
  assert set(WEDNESDAY_2018_05_09) == set(SATURDAY_1961_09_23) == set(DATE_FORMATS) == set(_PATTERNS)


@pytest.mark.parametrize("day, expected", [(datetime.date(2018, 5, 9), WEDNESDAY_2018_05_09),
                                           (datetime.date(1961, 9, 23), SATURDAY_1961_09_23)])
def test_format_date_matches_hand_written_strings(day, expected):
  for fmt in DATE_FORMATS:
    assert format_date(day, fmt) == expected[fmt], fmt


def test_hand_written_weekdays_are_the_calendar_weekdays():
  assert datetime.date(2018, 5, 9).weekday() == 2  # Wednesday
  assert datetime.date(1961, 9, 23).weekday() == 5  # Saturday


def test_ordinal_suffixes():
  got = [format_date(datetime.date(2020, 1, d), "the_dth_of_month_yyyy").split()[1]
         for d in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31)]
  assert got == ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]


def test_two_digit_year_rule_maps_onto_1950_2049():
  assert [expand_two_digit_year(y) for y in (0, 18, 49, 50, 61, 99)] == [2000, 2018, 2049, 1950, 1961, 1999]
  with pytest.raises(ValueError, match="two-digit year"):
    expand_two_digit_year(100)
  assert format_date(DATE_MIN, "dd.mm.yy") == "01.01.50" and format_date(DATE_MAX, "dd.mm.yy") == "31.12.49"


def test_format_date_rejects_unknown_format_and_out_of_range_date():
  with pytest.raises(ValueError, match=r"fmt must be one of \[.*'yyyymmdd'"):
    format_date(datetime.date(2018, 5, 9), "mm/dd/yyyy")
  with pytest.raises(ValueError, match="date must be in"):
    format_date(datetime.date(2050, 1, 1), "dd.mm.yy")


def test_every_source_string_names_exactly_one_date():
  # Exhaustive over all 36,525 days x all formats: no string is produced for two different dates, so no generated
  # source is ambiguous (e.g. no month-first numeric form slipped in).
  seen = {}
  for ordinal in range(DATE_MIN.toordinal(), DATE_MAX.toordinal() + 1):
    d = datetime.date.fromordinal(ordinal)
    for fmt in DATE_FORMATS:
      source = format_date(d, fmt)
      assert seen.setdefault(source, d) == d, (source, seen[source], d)


def test_formatted_dates_parse_back_with_correct_weekday():
  days = [DATE_MIN, DATE_MAX, datetime.date(2000, 2, 29), datetime.date(1999, 12, 31), datetime.date(2049, 1, 1)]
  days += [datetime.date.fromordinal(DATE_MIN.toordinal() + k * 97) for k in range(377)]
  for d in days:
    for fmt in DATE_FORMATS:
      assert _parse(format_date(d, fmt), fmt) == d, fmt


def test_generated_dates_targets_are_iso_of_source():
  examples = make_examples("dates", "train", 3000, seed=0)
  formats_seen = set()
  for source, target in examples:
    d = datetime.date.fromisoformat(target)
    assert DATE_MIN <= d <= DATE_MAX and target == d.isoformat()
    fmts = [fmt for fmt in DATE_FORMATS if format_date(d, fmt) == source]
    assert fmts, (source, target)
    assert _parse(source, fmts[0]) == d
    formats_seen.update(fmts)
  assert formats_seen == set(DATE_FORMATS)


def test_generated_dates_span_the_whole_range():
  years = {datetime.date.fromisoformat(t).year for _, t in make_examples("dates", "train", 20_000, seed=1)}
  assert years == set(range(1950, 2050))


# ---------------------------------------------------------------------------------------------- determinism/splits


@pytest.mark.parametrize("task", ["dates", "reverse"])
def test_same_seed_gives_same_examples_and_other_seed_differs(task):
  a = make_examples(task, "train", 500, seed=3)
  assert a == make_examples(task, "train", 500, seed=3)
  assert a != make_examples(task, "train", 500, seed=4)
  assert all(isinstance(s, str) and isinstance(t, str) for s, t in a) and len(a) == 500


def test_splits_use_different_streams_for_the_same_seed():
  for task in ("dates", "reverse"):
    train, val = make_examples(task, "train", 200, 0), make_examples(task, "validation", 200, 0)
    assert train != val


def test_dates_held_out_splits_share_no_pair_or_date_with_train():
  # Different seeds and sizes on purpose: disjointness must not depend on drawing the splits together.
  train = set(make_examples("dates", "train", 60_000, seed=0))
  for split, seed in (("validation", 0), ("test", 7)):
    held_out = set(make_examples("dates", split, 5_000, seed=seed))
    assert not held_out & train
    assert not {t for _, t in held_out} & {t for _, t in train}
  val = {t for _, t in make_examples("dates", "validation", 5_000, 1)}
  test = {t for _, t in make_examples("dates", "test", 5_000, 1)}
  assert not val & test


def test_reverse_targets_are_reversed_sources():
  for split in ("train", "validation", "test"):
    for source, target in make_examples("reverse", split, 1000, seed=0):
      assert target == source[::-1] and set(source) <= set("abcdefghijklmnopqrstuvwxyz")


def test_reverse_test_lengths_exceed_train_lengths():
  options = dict(min_len=2, train_max_len=6, test_max_len=9)
  train = {len(s) for s, _ in make_examples("reverse", "train", 2000, 0, **options)}
  val = {len(s) for s, _ in make_examples("reverse", "validation", 2000, 0, **options)}
  test = {len(s) for s, _ in make_examples("reverse", "test", 2000, 0, **options)}
  assert train == set(range(2, 7)) and val <= set(range(2, 7)) and test == {7, 8, 9}
  assert min(test) > max(train)


def test_reverse_validation_shares_no_pair_with_train():
  options = dict(min_len=1, train_max_len=4, alphabet="abc")  # a small space, where collisions would be certain
  train = set(make_examples("reverse", "train", 5000, 0, **options))
  val = set(make_examples("reverse", "validation", 2000, 1, **options))
  assert val and not val & train
  # Every string of the space lands in exactly one of the two parts.
  assert len(train) + len(val) == 3 + 9 + 27 + 81


def test_num_examples_zero_gives_empty_list():
  assert make_examples("dates", "test", 0, 0) == [] == make_examples("reverse", "validation", 0, 0)


# ----------------------------------------------------------------------------------------------------- registry


def test_unknown_task_or_split_raises_listing_valid_names():
  with pytest.raises(ValueError, match=r"task must be one of \['dates', 'reverse'\], got 'sort'"):
    make_examples("sort", "train", 10, 0)
  with pytest.raises(ValueError, match=r"split must be one of \['train', 'validation', 'test'\], got 'dev'"):
    make_examples("dates", "dev", 10, 0)


def test_bad_counts_seeds_and_options_raise():
  with pytest.raises(ValueError, match="num_examples"):
    make_examples("dates", "train", -1, 0)
  with pytest.raises(ValueError, match="seed"):
    make_examples("dates", "train", 1, -5)
  with pytest.raises(TypeError, match="invalid options.*'dates'"):
    make_examples("dates", "train", 1, 0, min_len=3)
  with pytest.raises(ValueError, match="min_len <= train_max_len < test_max_len"):
    make_examples("reverse", "train", 1, 0, train_max_len=20, test_max_len=20)


def test_register_task_adds_a_task(monkeypatch):
  monkeypatch.setattr(synthetic, "_TASKS", dict(synthetic._TASKS))

  @synthetic.register_task("copy")
  def _copy(split, num_examples, rng):
    return [(str(x), str(x)) for x in rng.integers(100, size=num_examples)]

  assert synthetic.task_names() == ("copy", "dates", "reverse")
  assert make_examples("copy", "test", 3, 0) == make_examples("copy", "test", 3, 0)
  with pytest.raises(ValueError, match="already registered"):
    synthetic.register_task("copy", _copy)


def test_generating_100k_examples_takes_under_2_seconds():
  for task in ("dates", "reverse"):
    start = time.perf_counter()
    examples = make_examples(task, "train", 100_000, seed=0)
    assert len(examples) == 100_000 and time.perf_counter() - start < 2.0, task
