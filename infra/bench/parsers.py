"""Sluice's parsers against the reference product's, side by side on the same files.

Generates the files with the reference libraries themselves (a 200-page PDF with PyMuPDF,
a 1,000,000-cell XLSX with openpyxl, a DOCX with python-docx, a PPTX with python-pptx),
then times each reader in its own process and takes that process's peak resident memory
from wait4(2): the reference parse (PyMuPDF page.get_text(), openpyxl read_only
iter_rows(values_only=True), python-docx paragraphs and table cells, python-pptx shape text,
tables and notes) and `sluice parse --text` (release build) with a budget large enough to
read everything. Prints a Markdown table. Run with `infra/local/bench-parsers`.
"""

import os
import subprocess
import sys
import tempfile
import time

REPEATS = 3


def generate(folder):
    import fitz
    import openpyxl
    import docx
    import pptx

    files = {}
    pdf_path = os.path.join(folder, "report.pdf")
    document = fitz.open()
    for number in range(200):
        page = document.new_page()
        lines = [f"Page {number + 1}: quarterly revenue for region {r} grew by {r * 3 % 17} percent." for r in range(40)]
        page.insert_text((50, 60), "\n".join(lines), fontsize=9)
    document.save(pdf_path)
    files["pdf"] = (pdf_path, 200, "pages")

    xlsx_path = os.path.join(folder, "cells.xlsx")
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Data")
    for row in range(100_000):
        sheet.append([row, f"SKU-{row % 977:05d}", row * 3, f"region {row % 13}", row % 97, 1.5 * row, "EUR", row % 7, f"note {row % 31}", row])
    workbook.save(xlsx_path)
    files["xlsx"] = (xlsx_path, 1_000_000, "cells")

    docx_path = os.path.join(folder, "memo.docx")
    word = docx.Document()
    for number in range(3000):
        word.add_paragraph(f"Paragraph {number}: the committee reviewed item {number % 41} and approved the budget.")
    table = word.add_table(rows=200, cols=5)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"r{r}c{c}"
    word.save(docx_path)
    files["docx"] = (docx_path, 3200, "paragraphs+rows")

    pptx_path = os.path.join(folder, "deck.pptx")
    deck = pptx.Presentation()
    for number in range(300):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {number}"
        slide.placeholders[1].text = "\n".join(f"Point {i} of slide {number}" for i in range(8))
        slide.notes_slide.notes_text_frame.text = f"Speaker notes for slide {number}"
    deck.save(pptx_path)
    files["pptx"] = (pptx_path, 300, "slides")
    return files


REFERENCE = {
    "pdf": "import fitz,sys\nd=fitz.open(sys.argv[1])\nn=sum(len(p.get_text()) for p in d)\nprint(n)",
    "xlsx": "import openpyxl,sys\nwb=openpyxl.load_workbook(sys.argv[1],read_only=True)\nn=0\nfor ws in wb.worksheets:\n for row in ws.iter_rows(values_only=True):\n  n+=len('\\t'.join('' if v is None else str(v) for v in row))\nprint(n)",
    "docx": "import docx,sys\nd=docx.Document(sys.argv[1])\nparts=[p.text for p in d.paragraphs]\nfor t in d.tables:\n for r in t.rows:\n  parts.append('\\t'.join(c.text for c in r.cells))\nprint(len('\\n'.join(parts)))",
    "pptx": "import pptx,sys\nd=pptx.Presentation(sys.argv[1])\nparts=[]\nfor s in d.slides:\n for sh in s.shapes:\n  if sh.has_text_frame: parts.append(sh.text_frame.text)\n  if getattr(sh,'has_table',False) and sh.has_table:\n   for r in sh.table.rows: parts.append('\\t'.join(c.text for c in r.cells))\n if s.has_notes_slide: parts.append(s.notes_slide.notes_text_frame.text)\nprint(len('\\n'.join(parts)))",
}


def measure(command, env=None):
    """Best wall time of REPEATS runs and the largest peak RSS (MiB).

    Peak memory comes from GNU time, which forks the command itself: a child forked
    straight from this (large) Python process would report this process's size.
    """
    best, peak = None, 0
    for _ in range(REPEATS):
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{command} failed: {done.stderr.decode()}")
        best = elapsed if best is None else min(best, elapsed)
        peak = max(peak, int(done.stderr.decode().strip().splitlines()[-1]) / 1024)
    return best, peak


def main():
    sluice = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        files = generate(folder)
        env = dict(os.environ, CHAT_PARSED_TEXT_MAX_CHARS="200000000", CHAT_MAX_UPLOAD_SIZE_MB="200")
        print("| format | file | reference (baseline) | units/s | peak MiB | Sluice | units/s | peak MiB | speed ratio |")
        print("|---|---|---|---|---|---|---|---|---|")
        names = {"pdf": "PyMuPDF get_text()", "xlsx": "openpyxl read_only", "docx": "python-docx", "pptx": "python-pptx"}
        for kind, (path, units, unit) in files.items():
            ref_time, ref_peak = measure([sys.executable, "-c", REFERENCE[kind], path])
            our_time, our_peak = measure([sluice, "parse", "--text", path], env)
            size = os.path.getsize(path) / 1024 / 1024
            print(
                f"| {kind} | {units:,} {unit}, {size:.1f} MiB | {names[kind]} {ref_time:.2f} s | {units / ref_time:,.0f} | {ref_peak:.0f} "
                f"| {our_time:.2f} s | {units / our_time:,.0f} | {our_peak:.0f} | {ref_time / our_time:.1f}x |"
            )


if __name__ == "__main__":
    main()
