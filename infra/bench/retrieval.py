"""Relevance of Sluice's search on a BEIR-layout test collection, against two baselines
computed in the same run on the same texts.

    python3 infra/bench/retrieval.py --beir FOLDER [--split dev] [--workers 4]

Reads the running stack's environment (`infra/local/stack.sh env test`): every document of
`corpus.jsonl` is uploaded through the API as a text file into one knowledge base of the
keyless local model (all-MiniLM-L6-v2), once per `chunk_context` setting (each document
named by its title, which `title` context indexes), and every query of `queries-<split>.jsonl` is asked
through `POST /rag/search` in each mode (`vector`, `keyword`, `hybrid`). A search answers
chunks; a document ranks where its first chunk does. Scores: nDCG@10 (gain 2^grade - 1), MRR@10 and recall@100 against `qrels/<split>.tsv`
(a grade above 0 is relevant). Baselines: `bm25s` (English stemmer and stop words, over
what Sluice is given: title and text where documents are named by their titles, the text
alone with `--names id`) and exact cosine over the same model's embeddings of each whole text (the
stack's embedding service), which also shows what chunking and the HNSW index change.
Prints a Markdown table.
"""

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import numpy as np


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_qrels(path):
    qrels = {}
    with open(path, encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            query, doc, score = line.rstrip("\n").split("\t")
            qrels.setdefault(query, {})[doc] = int(score)
    return qrels


def request(method, url, token=None, body=None, content_type="application/json", timeout=120):
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("content-type", content_type)
    with urllib.request.urlopen(req, timeout=timeout) as answer:
        return json.loads(answer.read() or b"null")


def multipart(filename, text):
    boundary = uuid.uuid4().hex
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
        f"Content-Type: text/plain\r\n\r\n"
    ).encode() + text.encode() + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def ndcg_at_10(ranked, judged):
    dcg = sum((2 ** judged.get(doc, 0) - 1) / math.log2(i + 2) for i, doc in enumerate(ranked[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def mrr_at_10(ranked, judged):
    for i, doc in enumerate(ranked[:10]):
        if judged.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def recall_at_100(ranked, judged):
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    return len(relevant & set(ranked[:100])) / len(relevant) if relevant else 0.0


def score(runs, qrels):
    queries = [q for q in runs if q in qrels]
    return {
        "nDCG@10": sum(ndcg_at_10(runs[q], qrels[q]) for q in queries) / len(queries),
        "MRR@10": sum(mrr_at_10(runs[q], qrels[q]) for q in queries) / len(queries),
        "recall@100": sum(recall_at_100(runs[q], qrels[q]) for q in queries) / len(queries),
    }


def bm25_runs(corpus, queries, titled=True):
    """`bm25s` over the texts Sluice indexes: each document's title and text, or with `titled`
    false (documents named by ids, so nothing gives Sluice the title) its text alone."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    texts = [f"{d.get('title', '')} {d['text']}" if titled else d["text"] for d in corpus]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize([q["text"] for q in queries], stopwords="en", stemmer=stemmer, show_progress=False)
    results, _ = retriever.retrieve(tokens, k=100, show_progress=False)
    return {q["_id"]: [corpus[i]["_id"] for i in row] for q, row in zip(queries, results)}


def embed(texts, base_url):
    vectors = []
    for start in range(0, len(texts), 32):
        answer = request("POST", f"{base_url}/embeddings", body={"model": "all-minilm-l6-v2", "input": texts[start:start + 32]})
        vectors.extend(item["embedding"] for item in sorted(answer["data"], key=lambda d: d["index"]))
    matrix = np.array(vectors, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def exact_cosine_runs(corpus, queries, base_url):
    documents = embed([d["text"] for d in corpus], base_url)
    asked = embed([q["text"] for q in queries], base_url)
    order = np.argsort(-(asked @ documents.T), axis=1)[:, :100]
    return {q["_id"]: [corpus[i]["_id"] for i in row] for q, row in zip(queries, order)}


def file_name(doc, names):
    """The document's file name: its title (which Sluice reads as the title where nothing in
    the text gives one), its id when untitled; with `names` `id`, always its id (`cran-17.txt`:
    no title context at all)."""
    if names == "id":
        return f"cran-{doc['_id']}.txt"
    title = "".join(c if c.isalnum() or c in " -_,()" else " " for c in (doc.get("title") or "")).strip()
    return f"{' '.join(title.split())[:100] or 'doc ' + doc['_id']}.txt"


def sluice_index(corpus, api, token, workers, chunk_context, names):
    base = request("POST", f"{api}/api/v1/kb", token, {
        "name": f"Relevance benchmark ({chunk_context})", "scope": "personal",
        "embedding_provider": "local", "embedding_model": "all-minilm-l6-v2",
        "ingestion_config": {"chunk_context": chunk_context}})
    kb, collection = base["id"], base["collection_name"]
    started = time.time()

    def upload(doc):
        body, content_type = multipart(file_name(doc, names), doc["text"])
        try:
            answer = request("POST", f"{api}/api/v1/kb/{kb}/documents", token, body, content_type)
            return answer["tracking_id"], doc["_id"]
        except urllib.error.HTTPError as refusal:
            # Sluice refuses an empty file; the collection keeps such documents (no text).
            if refusal.code == 400:
                return None, doc["_id"]
            raise

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        uploaded = list(pool.map(upload, corpus))
    refused = [doc for document, doc in uploaded if document is None]
    if refused:
        print(f"refused by the upload check (no text): {', '.join(refused)}", file=sys.stderr)
    while True:
        status = request("GET", f"{api}/api/v1/kb/{kb}/ingestion", token)
        if status.get("indexing_status") == "complete":
            break
        time.sleep(2)
    return collection, {document: doc for document, doc in uploaded if document}, time.time() - started


def sluice_runs(queries, api, token, collection, documents, mode, top_k=100):
    """Each query's documents in Sluice's order, the latencies, and (hybrid) each hit's place
    in each leg, for the fusion study. `top_k` None asks the API's default."""
    runs, latencies, places = {}, [], {}
    for q in queries:
        asked = time.time()
        body = {"query": q["text"], "collections": [collection], "mode": mode, "explain": mode == "hybrid"}
        if top_k is not None:
            body["top_k"] = top_k
        answer = request("POST", f"{api}/api/v1/rag/search", token, body)
        latencies.append(time.time() - asked)
        runs[q["_id"]] = documents_in_order(answer["results"], documents)
        places[q["_id"]] = [(hit, hit.get("explain") or {}) for hit in answer["results"]]
    return runs, sorted(latencies), places


def documents_in_order(hits, documents):
    """A search's chunks as documents: a document ranks where its first chunk does."""
    ranked = []
    for hit in hits:
        doc = documents.get(hit.get("document_id"))
        if doc and doc not in ranked:
            ranked.append(doc)
    return ranked


def fusions():
    """The fusions the study compares: reciprocal rank fusion at several k and keyword
    weights, and a convex combination of each leg's min-max normalised scores."""
    def rrf(k, keyword_weight):
        def fuse(v, w):
            return (1 / (k + v["rank"]) if v else 0) + (keyword_weight / (k + w["rank"]) if w else 0)
        return fuse
    options = [(f"RRF k={k}, keyword weight {w}", rrf(k, w), None) for k in (10, 30, 60, 100) for w in (0.5, 1.0, 1.5, 2.0)]
    options += [(f"convex, vector weight {a}", None, a) for a in (0.3, 0.4, 0.5, 0.6, 0.7)]
    return options


def fused_runs(places, documents, fuse, alpha):
    """Each query's documents in the order `fuse` (ranks) or the convex combination `alpha`
    (normalised scores) puts its hybrid candidates."""
    runs = {}
    for query, hits in places.items():
        legs = {}
        for leg in ("vector", "keyword"):
            scores = [e[leg]["score"] for _, e in hits if e.get(leg)]
            legs[leg] = (min(scores), max(scores)) if scores else (0.0, 0.0)

        def normalised(e, leg):
            if not e.get(leg):
                return 0.0
            low, high = legs[leg]
            return (e[leg]["score"] - low) / (high - low) if high > low else 1.0

        def score(e):
            if fuse is not None:
                return fuse(e.get("vector"), e.get("keyword"))
            return alpha * normalised(e, "vector") + (1 - alpha) * normalised(e, "keyword")

        ordered = sorted(hits, key=lambda item: -score(item[1]))
        runs[query] = documents_in_order([hit for hit, _ in ordered], documents)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", required=True, help="a BEIR-layout folder (corpus.jsonl, queries-<split>.jsonl, qrels/)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sluice", default="./target/release/sluice", help="the CLI that mints the local token")
    parser.add_argument("--chunk-context", default="none,title_and_headings",
                        help="the chunk_context settings to index and score, comma-separated")
    parser.add_argument("--names", choices=("title", "id"), default="title",
                        help="upload each document under its title (default) or its id (no title context)")
    parser.add_argument("--study", action="store_true",
                        help="also score other fusions of the hybrid candidates, on the split's two halves")
    args = parser.parse_args()
    corpus = read_jsonl(os.path.join(args.beir, "corpus.jsonl"))
    queries = read_jsonl(os.path.join(args.beir, f"queries-{args.split}.jsonl"))
    qrels = read_qrels(os.path.join(args.beir, "qrels", f"{args.split}.tsv"))
    queries = [q for q in queries if q["_id"] in qrels]
    api, embedder = os.environ["SLUICE_API_URL"], os.environ["SLUICE_LOCAL_EMBEDDINGS_URL"]
    token = subprocess.run([args.sluice, "token", "--user", str(uuid.uuid4())], check=True,
                           capture_output=True, text=True).stdout.strip()

    rows = []
    baseline_started = time.time()
    bm25 = bm25_runs(corpus, queries, titled=args.names == "title")
    rows.append(("`bm25s` baseline (English stemmer, stop words)", score(bm25, qrels)))
    rows.append(("exact cosine baseline (whole text, same model)",
                 score(exact_cosine_runs(corpus, queries, embedder), qrels)))
    baselines = time.time() - baseline_started
    latency, indexed = {}, {}
    study = []
    # The split's two halves by query id: the study tunes on the first, and reads the second
    # only to see whether a gain holds.
    ordered_ids = sorted((q["_id"] for q in queries), key=lambda i: int(i) if i.isdigit() else i)
    tune = set(ordered_ids[: len(ordered_ids) // 2])
    halves = {"tune": {q: j for q, j in qrels.items() if q in tune},
              "held out": {q: j for q, j in qrels.items() if q not in tune}}
    for context in args.chunk_context.split(","):
        collection, documents, indexed[context] = sluice_index(corpus, api, token, args.workers, context, args.names)
        for mode in ("vector", "keyword", "hybrid"):
            runs, latencies, places = sluice_runs(queries, api, token, collection, documents, mode)
            rows.append((f"Sluice `{mode}`, `chunk_context` {context}", score(runs, qrels)))
            latency[f"{mode} ({context})"] = (latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.95)])
            if args.study and mode == "hybrid":
                study.append((f"Sluice's fusion as it answers ({context})", runs))
                for label, fuse, alpha in fusions():
                    study.append((f"{label} ({context})", fused_runs(places, documents, fuse, alpha)))
        # The first pass embeds each query in `vector` and finds it cached in `hybrid`; asked
        # again, both find it cached: the two modes' latencies like for like.
        # Then as an agent asks, at the API's default `top_k` (the relevance runs ask 100 deep
        # for recall@100, which makes each leg read deeper).
        for mode, top_k, label in (("vector", 100, "asked again"), ("hybrid", 100, "asked again"),
                                   ("vector", None, "asked again at the default top_k"),
                                   ("hybrid", None, "asked again at the default top_k")):
            _, latencies, _ = sluice_runs(queries, api, token, collection, documents, mode, top_k)
            latency[f"{mode} {label} ({context})"] = (latencies[len(latencies) // 2],
                                                      latencies[int(len(latencies) * 0.95)])

    name = os.path.basename(os.path.normpath(args.beir))
    print(f"{len(corpus)} documents (named by {args.names}), {len(queries)} `{args.split}` queries of `{name}`; "
          f"indexed through the API in " + ", ".join(f"{s:.0f} s ({c})" for c, s in indexed.items())
          + f"; baselines {baselines:.0f} s; search p50/p95 "
          + ", ".join(f"{m} {1000 * p50:.0f}/{1000 * p95:.0f} ms" for m, (p50, p95) in latency.items()) + "\n")
    print("| method | nDCG@10 | MRR@10 | recall@100 |")
    print("|---|---|---|---|")
    for label, metrics in rows:
        print(f"| {label} | {metrics['nDCG@10']:.3f} | {metrics['MRR@10']:.3f} | {metrics['recall@100']:.3f} |")
    best = max(rows[0][1]["nDCG@10"], rows[1][1]["nDCG@10"])
    for label, metrics in rows[2:]:
        print(f"\n{label}: nDCG@10 {metrics['nDCG@10'] - best:+.3f} against the better baseline", end="")
    for label, metrics in rows[2:]:
        if label.startswith("Sluice `keyword`"):
            print(f"\n{label} against `bm25s`: nDCG@10 {metrics['nDCG@10'] - rows[0][1]['nDCG@10']:+.3f}", end="")
    print()
    if study:
        print("\nFusion study: nDCG@10 of the same hybrid candidates ordered otherwise, on each half of the split\n")
        print("| fusion | nDCG@10 tune | nDCG@10 held out |")
        print("|---|---|---|")
        for label, runs in study:
            tuned, held = score(runs, halves["tune"]), score(runs, halves["held out"])
            print(f"| {label} | {tuned['nDCG@10']:.3f} | {held['nDCG@10']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
