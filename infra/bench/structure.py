"""Document structure: Sluice's markdown against pymupdf4llm's on documents of known structure.

Generates a seeded set of reports with reportlab (one and two columns; headings at three
levels; prose; bulleted and numbered lists; ruled and unruled tables; a running header and
a page number on every page) and the same content as DOCX with python-docx, recording each
document's structure as it was written. Both readers' markdown is scored against it:

- headings: precision and recall of (text, level), levels compared by rank (a reader may
  start at `##`), and of the text alone;
- tables: cell accuracy, the share of the truth's cells whose text is in the same row and
  column of the best-matching table read;
- reading order: the share of the prose paragraphs out of order or missing (the paragraphs
  found, in the order read, against the order written: n minus their longest increasing
  run, over n);
- lists: the share of the list items read as list items with their text;
- running lines: the running header's occurrences left in the text, per page.

Speed: pages a second over all PDFs, Sluice (`sluice parse --markdown`, release build, its
own elapsed time: the worker process and the read) against pymupdf4llm.to_markdown in this
process. pymupdf4llm does not read DOCX: those rows are Sluice's alone. Run with
`infra/local/bench-structure [DOCUMENTS] [SEED]`.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

WORDS = (
    "harbour channel survey pump valve berth council budget tide pilot quay dredging silt "
    "vessel cargo crane ledger mooring buoy lighthouse storm winter summer traffic permit "
    "inspection engine boiler seal gasket turbine station meter pressure flow drain filter "
    "tank pipe motor schedule report minute record member meeting approval repair estimate "
    "contract supplier invoice payment revenue expense forecast quarter region district port "
    "northern southern eastern western harbourmaster ferry passenger freight container "
    "warehouse safety training drill alarm fire water power light signal radio chart depth"
).split()
HEADER = "Harbour Authority Structure Benchmark"


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def sentence(rng):
    text = words(rng, rng.randint(8, 15))
    return text[0].upper() + text[1:] + "."


def prose(rng):
    return " ".join(sentence(rng) for _ in range(rng.randint(3, 6)))


def structure(rng, index):
    """The document's blocks, in reading order."""
    blocks = [("heading", 1, f"Report {index} on the {words(rng, 2)}")]
    for section in range(1, rng.randint(3, 4) + 1):
        blocks.append(("heading", 2, f"Section {section} {words(rng, 2)}"))
        blocks.append(("paragraph", prose(rng)))
        for sub in range(1, rng.randint(1, 2) + 1):
            blocks.append(("heading", 3, f"Part {section}.{sub} {words(rng, 2)}"))
            blocks.append(("paragraph", prose(rng)))
            kind = rng.random()
            if kind < 0.3:
                blocks.append(("list", "bullet", [words(rng, rng.randint(3, 7)) for _ in range(rng.randint(3, 5))]))
            elif kind < 0.55:
                blocks.append(("list", "number", [words(rng, rng.randint(3, 7)) for _ in range(rng.randint(3, 5))]))
            else:
                columns = rng.randint(3, 4)
                header = [w.title() for w in rng.sample(WORDS, columns)]
                rows = [header] + [
                    [words(rng, rng.randint(1, 2))] + [str(rng.randint(1, 9999)) for _ in range(columns - 1)]
                    for _ in range(rng.randint(3, 6))
                ]
                blocks.append(("table", kind < 0.8, rows))
            blocks.append(("paragraph", prose(rng)))
    return blocks


def write_pdf(path, blocks, columns):
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import BaseDocTemplate, Frame, KeepTogether, ListFlowable, ListItem, PageTemplate, Paragraph, Table, TableStyle

    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=10, leading=13, spaceAfter=6)
    headings = {
        1: ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=18, leading=22, spaceAfter=10),
        2: ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=14, leading=18, spaceBefore=8, spaceAfter=6),
        3: ParagraphStyle("h3", fontName="Helvetica-Bold", fontSize=11.5, leading=15, spaceBefore=6, spaceAfter=4),
    }
    width, height = letter

    def margins(canvas, document):
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(72, height - 40, HEADER)
        canvas.drawCentredString(width / 2, 36, str(document.page))
        canvas.restoreState()

    gap = 18
    frame_width = (width - 144 - gap * (columns - 1)) / columns
    frames = [Frame(72 + i * (frame_width + gap), 72, frame_width, height - 144, id=f"c{i}") for i in range(columns)]
    document = BaseDocTemplate(path, pagesize=letter)
    document.addPageTemplates([PageTemplate(id="page", frames=frames, onPage=margins)])
    story = []
    for block in blocks:
        if block[0] == "heading":
            story.append(Paragraph(block[2], headings[block[1]]))
        elif block[0] == "paragraph":
            story.append(Paragraph(block[1], body))
        elif block[0] == "list":
            items = [ListItem(Paragraph(text, body)) for text in block[2]]
            story.append(ListFlowable(items, bulletType="bullet" if block[1] == "bullet" else "1", start=None if block[1] == "number" else "\u2022"))
        else:
            table = Table(block[2])
            style = [("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 9), ("FONT", (0, 1), (-1, -1), "Helvetica", 9)]
            if block[1]:
                style.append(("GRID", (0, 0), (-1, -1), 0.5, colors.black))
            table.setStyle(TableStyle(style))
            # A table is kept whole on one page or column, as an author would set it.
            story.append(KeepTogether([table]))
    document.build(story)
    return document.page


def write_docx(path, blocks):
    import docx

    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = HEADER
    for block in blocks:
        if block[0] == "heading":
            document.add_heading(block[2], level=block[1])
        elif block[0] == "paragraph":
            document.add_paragraph(block[1])
        elif block[0] == "list":
            style = "List Bullet" if block[1] == "bullet" else "List Number"
            for text in block[2]:
                document.add_paragraph(text, style=style)
        else:
            rows = block[2]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            if block[1]:
                table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, text in enumerate(row):
                    table.cell(r, c).text = text
    document.save(path)


def norm(text):
    text = re.sub(r"[*_`]", "", text)
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def read_markdown(markdown):
    """Headings (level, text), list items, tables (rows of cells) and the plain words."""
    headings, items, tables = [], [], []
    table = None
    for line in markdown.split("\n"):
        s = line.strip()
        if s.startswith("|") and s.endswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", s[1:-1])]
            if all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c):
                continue
            if table is None:
                table = []
                tables.append(table)
            table.append([norm(c) for c in cells])
            continue
        table = None
        heading = re.match(r"^(#{1,6})\s+(.*)$", s)
        if heading:
            headings.append((len(heading.group(1)), norm(heading.group(2))))
            continue
        item = re.match(r"^(?:[-*+\u2022]|\d+[.)])\s+(.*)$", s)
        if item:
            items.append(norm(item.group(1)))
    return headings, items, tables, norm(markdown)


def ranks(levels):
    order = sorted(set(levels))
    return {level: order.index(level) for level in order}


def longest_increasing(values):
    import bisect

    tails = []
    for value in values:
        at = bisect.bisect_left(tails, value)
        tails[at:at + 1] = [value]
    return len(tails)


def score(blocks, markdown, pages):
    headings, items, tables, plain = read_markdown(markdown)
    truth_headings = [(b[1], norm(b[2])) for b in blocks if b[0] == "heading"]
    truth_rank = ranks([level for level, _ in truth_headings])
    found_rank = ranks([level for level, _ in headings])
    truth_set = {(truth_rank[level], text) for level, text in truth_headings}
    found_set = {(found_rank[level], text) for level, text in headings}
    truth_texts = {text for _, text in truth_headings}
    found_texts = {text for _, text in headings}
    heading = {
        "precision": len(truth_set & found_set) / max(1, len(found_set)),
        "recall": len(truth_set & found_set) / max(1, len(truth_set)),
        "text_precision": len(truth_texts & found_texts) / max(1, len(found_texts)),
        "text_recall": len(truth_texts & found_texts) / max(1, len(truth_texts)),
    }
    cells = right = 0
    for block in (b for b in blocks if b[0] == "table"):
        truth = [[norm(c) for c in row] for row in block[2]]
        cells += sum(len(row) for row in truth)

        def agreeing(found):
            return sum(
                1
                for r, row in enumerate(truth)
                for c, text in enumerate(row)
                if r < len(found) and c < len(found[r]) and found[r][c] == text
            )

        right += max((agreeing(found) for found in tables), default=0)
    positions = []
    paragraphs = [norm(b[1]) for b in blocks if b[0] == "paragraph"]
    for text in paragraphs:
        key = " ".join(text.split()[:8])
        at = plain.find(key)
        if at >= 0:
            positions.append(at)
    truth_items = [norm(t) for b in blocks if b[0] == "list" for t in b[2]]
    found_items = set(items)
    return {
        "heading": heading,
        "cells": right / cells if cells else None,
        "order_error": (len(paragraphs) - longest_increasing(positions)) / max(1, len(paragraphs)),
        "items": sum(1 for t in truth_items if t in found_items) / len(truth_items) if truth_items else None,
        "running": markdown.count(HEADER) / pages if pages else None,
    }


def sluice_markdown(sluice, path):
    text = subprocess.run([sluice, "parse", "--text", "--markdown", path], capture_output=True, text=True, check=True).stdout
    verdict = json.loads(subprocess.run([sluice, "parse", "--markdown", path], capture_output=True, text=True, check=True).stdout)
    return text, verdict["elapsed_ms"] / 1000.0


def running(scores):
    values = [s["running"] for s in scores if s["running"] is not None]
    return f"{mean(values):.2f}" if values else "—"


def mean(values):
    # A document without tables (or lists) says nothing of how they are read.
    values = [v for v in values if v is not None]
    return sum(values) / max(1, len(values))


def main():
    sluice = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    import pymupdf4llm

    rng = random.Random(seed)
    results = {"sluice pdf": [], "pymupdf4llm pdf": [], "sluice docx": []}
    seconds = {"sluice": 0.0, "pymupdf4llm": 0.0}
    total_pages = 0
    with tempfile.TemporaryDirectory() as folder:
        for index in range(count):
            blocks = structure(rng, index + 1)
            columns = 1 if index % 2 == 0 else 2
            pdf = os.path.join(folder, f"report{index}.pdf")
            pages = write_pdf(pdf, blocks, columns)
            total_pages += pages
            docx_path = os.path.join(folder, f"report{index}.docx")
            write_docx(docx_path, blocks)
            markdown, elapsed = sluice_markdown(sluice, pdf)
            seconds["sluice"] += elapsed
            results["sluice pdf"].append(score(blocks, markdown, pages))
            started = time.perf_counter()
            reference = pymupdf4llm.to_markdown(pdf, show_progress=False)
            seconds["pymupdf4llm"] += time.perf_counter() - started
            results["pymupdf4llm pdf"].append(score(blocks, reference, pages))
            markdown, _ = sluice_markdown(sluice, docx_path)
            # A DOCX has no pages: its header is written once, before the body.
            results["sluice docx"].append(score(blocks, markdown, None))
            if os.environ.get("BENCH_STRUCTURE_KEEP"):
                keep = os.environ["BENCH_STRUCTURE_KEEP"]
                os.makedirs(keep, exist_ok=True)
                for name, text in [(f"report{index}.sluice.md", sluice_markdown(sluice, pdf)[0]), (f"report{index}.pymupdf4llm.md", reference)]:
                    with open(os.path.join(keep, name), "w") as out:
                        out.write(text)
                for name in (pdf, docx_path):
                    os.replace(name, os.path.join(keep, os.path.basename(name)))
                with open(os.path.join(keep, f"report{index}.json"), "w") as out:
                    json.dump(blocks, out)
    print(f"{count} documents (seed {seed}; half one column, half two), {total_pages} PDF pages\n")
    print("| reader | heading P / R (with level) | heading P / R (text) | table cells | reading-order error | list items | running header left / page |")
    print("|---|---|---|---|---|---|---|")
    for name, scores in results.items():
        h = lambda key: mean(s["heading"][key] for s in scores)
        print(
            f"| {name} | {h('precision'):.3f} / {h('recall'):.3f} | {h('text_precision'):.3f} / {h('text_recall'):.3f} | "
            f"{mean(s['cells'] for s in scores):.3f} | {mean(s['order_error'] for s in scores):.3f} | "
            f"{mean(s['items'] for s in scores):.3f} | {running(scores)} |"
        )
    sluice_rate = total_pages / max(1e-9, seconds["sluice"])
    reference_rate = total_pages / max(1e-9, seconds["pymupdf4llm"])
    print(f"\nSpeed on the PDFs: Sluice {sluice_rate:.1f} pages/s, pymupdf4llm {reference_rate:.1f} pages/s: "
          f"**{sluice_rate / reference_rate:.1f}×**")


if __name__ == "__main__":
    main()
