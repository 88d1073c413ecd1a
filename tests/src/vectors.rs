//! Vectors for the tests and benchmarks: a seeded generator (a failure replays from its
//! seed), pgvector's text form, and the local embedding service's vector for a text.

/// A small deterministic generator (xorshift).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Roughly normal, mean 0, deviation 1 (the sum of twelve uniforms).
    pub fn normal(&mut self) -> f32 {
        (0..12).map(|_| (self.next_u64() % 1_000_000) as f32 / 1_000_000.0).sum::<f32>() - 6.0
    }

    /// A unit vector of `dimensions`, uniform in each coordinate before normalising.
    pub fn unit_vector(&mut self, dimensions: usize) -> Vec<f32> {
        normalised((0..dimensions).map(|_| (self.next_u64() % 2001) as f32 / 1000.0 - 1.0).collect())
    }
}

pub fn normalised(v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / norm).collect()
}

/// pgvector's text form, `[x,y,…]`.
pub fn literal(v: &[f32]) -> String {
    format!("[{}]", v.iter().map(f32::to_string).collect::<Vec<_>>().join(","))
}

/// The stack's local embedding service's vector for `text` (`SLUICE_LOCAL_EMBEDDINGS_URL`).
pub async fn local_embedding(text: &str) -> Vec<f32> {
    let target = sluice_embed::client::Target {
        base_url: std::env::var("SLUICE_LOCAL_EMBEDDINGS_URL").expect("SLUICE_LOCAL_EMBEDDINGS_URL"),
        model: "all-minilm-l6-v2".to_owned(),
        dimensions: 384,
        api_key: None,
        api: Default::default(),
    };
    let texts = [text.to_owned()];
    sluice_embed::client::embed(&sluice_embed::http_client(), &target, &texts, Default::default())
        .await
        .expect("embedded")
        .remove(0)
}

// The search and scale benchmarks' corpus: embeddings around topic centroids, as a real
// corpus's cluster, and texts whose words follow a Zipf law per topic.

pub const CLUSTERS: usize = 200;

/// A point near one of the topic centroids, as embeddings of a real corpus cluster.
pub fn near(rng: &mut Rng, centroids: &[Vec<f32>]) -> Vec<f32> {
    near_topic(rng, centroids).1
}

/// A topic, and a point near its centroid.
pub fn near_topic(rng: &mut Rng, centroids: &[Vec<f32>]) -> (usize, Vec<f32>) {
    let topic = (rng.next_u64() % centroids.len() as u64) as usize;
    (topic, normalised(centroids[topic].iter().map(|x| x + 0.06 * rng.normal()).collect()))
}

pub const VOCABULARY: usize = 20_000;

/// English stop words: the most frequent ranks of a real text, which the English text
/// search configuration drops.
const STOP_WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he",
    "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "they", "you", "were", "her", "she",
    "there", "been", "one", "all", "we", "their", "has", "would", "when", "if", "so", "no", "will", "can", "more",
    "out", "up",
];

/// `count` words of `topic`: ranks drawn from a Zipf law over the vocabulary, the first 50
/// ranks stop words, the next 500 shared by every topic, the rest each topic's own region.
pub fn topic_words(rng: &mut Rng, topic: usize, count: usize) -> String {
    (0..count)
        .map(|_| {
            // Inverse of the Zipf CDF, approximately: rank = V^u.
            let u = (rng.next_u64() % 1_000_000) as f64 / 1_000_000.0;
            let rank = (VOCABULARY as f64).powf(u) as usize;
            match rank {
                r if r < STOP_WORDS.len() => STOP_WORDS[r].to_owned(),
                r if r < 550 => format!("w{r}"),
                r => format!("w{}", 550 + (r + topic * 97) % (VOCABULARY - 550)),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value at quantile `p` of `sorted`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
