"""Reading the report's Markdown tables back, for tests that compare a table's cells with the runs' own files."""


def table_rows(markdown: str, heading: str) -> list[dict[str, str]]:
  """The rows of the first table after ``heading``, each a dict from column title to cell text."""
  lines = markdown[markdown.index(heading):].splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith("|"))
  rows = []
  for line in lines[start:]:
    if not line.startswith("|"):
      break
    rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
  header, body = rows[0], rows[2:]
  return [dict(zip(header, row)) for row in body]
