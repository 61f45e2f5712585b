"""SQuAD v1.1's training paragraphs as a pre-training corpus: 18,891 distinct Wikipedia paragraphs, one per
blank-line-separated document (tokenmask's default document boundary). Used by the studies of issue 48.

    python benchmarks/squad_corpus.py /tmp/squad-paragraphs.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenmask.labelled.questions import read_questions, squad_file

if __name__ == "__main__":
    paragraphs = dict.fromkeys(q.context.replace("\n", " ").strip() for q in read_questions(squad_file("train")))
    Path(sys.argv[1]).write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    print(f"{len(paragraphs):,} paragraphs, {sum(len(p.split()) for p in paragraphs):,} words -> {sys.argv[1]}")
