"""Offline study of keyword-leg variants before any is built into Sluice.

BM25 over a BEIR-layout collection's whole documents (English stemmer and stop words, as the
baseline `bm25s`), fused with exact cosine over the keyless model's embeddings by RRF k 60,
as a hybrid search fuses; each variant scored by nDCG@10 on all judged queries and on two
halves of them (by id: even places, odd places), so a gain that holds on only one half
shows. Variants: BM25F (the title's words counted `w` times), RM3 pseudo-relevance feedback
from the keyword ranking's own best documents (and from the fused ranking's), feedback that
only reorders the first ranking's best N, and Rocchio feedback on the query vector.

Run with the local stack up (its embedding service embeds the texts):
  eval "$(infra/local/stack.sh env test)"
  .local/venv-retrieval/bin/python infra/bench/keyword_study.py [--beir ../shared/retrieval/cranfield]
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import retrieval  # noqa: E402

K1, B = 1.2, 0.75


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", default=os.path.join(os.path.dirname(__file__), "../../../shared/retrieval/cranfield"))
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    import bm25s
    import Stemmer

    corpus = retrieval.read_jsonl(f"{args.beir}/corpus.jsonl")
    qrels = retrieval.read_qrels(f"{args.beir}/qrels/{args.split}.tsv")
    queries = [q for q in retrieval.read_jsonl(f"{args.beir}/queries-{args.split}.jsonl") if q["_id"] in qrels]
    stemmer = Stemmer.Stemmer("english")

    def tokens(texts):
        return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False)

    titles, bodies, asked = (tokens([d.get("title", "") for d in corpus]), tokens([d["text"] for d in corpus]),
                             tokens([q["text"] for q in queries]))
    vocabulary = {}
    for words in titles + bodies + asked:
        for word in words:
            vocabulary.setdefault(word, len(vocabulary))
    n, v = len(corpus), len(vocabulary)

    def counts(lists):
        matrix = np.zeros((n, v), dtype=np.float32)
        for i, words in enumerate(lists):
            for word in words:
                matrix[i, vocabulary[word]] += 1
        return matrix

    title_tf, body_tf = counts(titles), counts(bodies)

    def bm25_weights(title_weight):
        tf = body_tf + title_weight * title_tf
        length = tf.sum(1, keepdims=True)
        df = (tf > 0).sum(0)
        idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / length.mean()))

    # The query's words once each, as Sluice's any-of query reads them.
    query = np.zeros((len(queries), v), dtype=np.float32)
    for j, words in enumerate(asked):
        for word in words:
            query[j, vocabulary[word]] = 1.0
    shares = (body_tf + title_tf) / np.maximum((body_tf + title_tf).sum(1, keepdims=True), 1)

    def runs(scores):
        order = np.argsort(-scores, axis=1)[:, :100]
        return {q["_id"]: [corpus[i]["_id"] for i in row if scores[j, i] > 0]
                for j, (q, row) in enumerate(zip(queries, order))}

    def rm3(weights, feedback_rows, terms, kept):
        expanded = np.zeros_like(query)
        for j in range(len(queries)):
            rows, scores = feedback_rows(j)
            if len(rows) == 0 or scores.sum() <= 0:
                expanded[j] = query[j]
                continue
            distribution = (scores[:, None] / scores.sum() * shares[rows]).sum(0)
            keep = np.argsort(-distribution)[:terms]
            added = np.zeros(v, dtype=np.float32)
            added[keep] = distribution[keep]
            expanded[j] = kept * query[j] / query[j].sum() + (1 - kept) * added / added.sum()
        return expanded @ weights.T

    url = os.environ["SLUICE_LOCAL_EMBEDDINGS_URL"]
    documents = retrieval.embed([f"{d.get('title', '')}\n{d['text']}" for d in corpus], url)
    asked_vectors = retrieval.embed([q["text"] for q in queries], url)
    cosine = asked_vectors @ documents.T
    vector_runs = runs(cosine + 10)

    def rrf(first, second, k=60):
        fused = {}
        for q in first:
            score = {}
            for ranked in (first[q], second[q]):
                for rank, doc in enumerate(ranked):
                    score[doc] = score.get(doc, 0) + 1 / (k + rank + 1)
            fused[q] = sorted(score, key=lambda d: -score[d])
        return fused

    ids = sorted(q["_id"] for q in queries)
    halves = (set(ids[::2]), set(ids[1::2]))

    def ndcg(ranked, only=None):
        chosen = [q["_id"] for q in queries if only is None or q["_id"] in only]
        return float(np.mean([retrieval.ndcg_at_10(ranked[q], qrels[q]) for q in chosen]))

    def report(label, keyword, vector=None):
        hybrid = rrf(vector or vector_runs, keyword)
        print(f"| {label} | {ndcg(keyword):.4f} | {ndcg(hybrid):.4f} | {ndcg(hybrid, halves[0]):.4f} | "
              f"{ndcg(hybrid, halves[1]):.4f} |")

    print(f"{len(corpus)} documents, {len(queries)} judged `{args.split}` queries; exact cosine alone "
          f"nDCG@10 {ndcg(vector_runs):.4f}")
    print()
    print("| keyword leg | keyword nDCG@10 | hybrid nDCG@10 | hybrid, first half | hybrid, second half |")
    print("|---|---|---|---|---|")
    plain = bm25_weights(1.0)
    first = query @ plain.T
    keyword_runs = runs(first)
    hybrid_runs = rrf(vector_runs, keyword_runs)
    report("BM25, title and text as one (baseline)", keyword_runs)
    for title_weight in (2.0, 3.0, 5.0):
        report(f"BM25F, title words counted {title_weight:g}×", runs(query @ bm25_weights(title_weight).T))

    def own_best(chunks):
        def rows(j):
            best = np.argsort(-first[j])[:chunks]
            return best, first[j, best]
        return rows

    for chunks, terms, kept in ((3, 10, 0.5), (5, 10, 0.5), (5, 20, 0.5), (5, 20, 0.7), (10, 20, 0.5)):
        report(f"RM3 from its own best {chunks}, {terms} words, query keeps {kept:g}",
               runs(rm3(plain, own_best(chunks), terms, kept)))
    index = {d["_id"]: i for i, d in enumerate(corpus)}

    def fused_best(j):
        best = np.array([index[d] for d in hybrid_runs[queries[j]["_id"]][:5]])
        return best, np.array([1 / (60 + r + 1) for r in range(len(best))])

    report("RM3 from the fused ranking's best 5, 20 words, 0.5", runs(rm3(plain, fused_best, 20, 0.5)))
    expanded = rm3(plain, own_best(5), 20, 0.5)
    for pool in (50, 100, 200):
        mask = np.zeros_like(expanded, dtype=bool)
        for j in range(len(queries)):
            best = np.argsort(-first[j])[:pool]
            mask[j, best] = first[j, best] > 0
        report(f"RM3 (own best 5, 20 words, 0.5) reordering the first {pool} only", runs(np.where(mask, expanded, 0)))
    for chunks, beta in ((3, 0.5), (5, 1.0)):
        moved = asked_vectors.copy()
        for j in range(len(queries)):
            moved[j] = asked_vectors[j] + beta * documents[np.argsort(-cosine[j])[:chunks]].mean(0)
        report(f"RM3 keyword leg, and Rocchio on the query vector ({chunks} best, β {beta:g})",
               runs(expanded), runs(moved @ documents.T + 10))


if __name__ == "__main__":
    main()
