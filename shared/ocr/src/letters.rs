//! Characters the recognizer reads as a look-alike. PP-OCRv6 reads printed curly quotes as `"` with
//! the curly one close behind, where a straight quote has none near. It saw few of some languages'
//! letters in training: where a Turkish page prints a dotless `ı`, or a Polish one `ą`, it often
//! ranks the letter a close second behind `i` or `a`; a page of those languages reads the letter
//! there. And it tells the typographic apostrophe `’` from the straight `'` poorly, one at a time,
//! but a page prints its apostrophes one way: the page's apostrophes together decide. Measured on
//! the multilingual benchmark's scans (docs/ocr.md, "Letters read as a look-alike").

/// A language's letter the recognizer ranks just behind a look-alike it reads instead:
/// (the language's Tesseract code, the look-alike read, the letter meant). Only pairs where,
/// on the benchmark's pages, the meant letter's probability at such a step stood clearly apart
/// from its probability where the look-alike was right (`ł` read as `l` did not, so it is not here).
const LOOK_ALIKES: [(&str, char, char); 7] = [
    ("pol", 'a', 'ą'),
    ("pol", 'e', 'ę'),
    ("tur", 'i', 'ı'),
    ("tur", '1', 'ı'),
    ("tur", 'i', 'İ'),
    ("tur", 'I', 'İ'),
    ("tur", 'ș', 'ş'),
];

// Each look-alike is one bit of the `u8` a page's alphabet carries. The mask crosses releases
// in the extraction options, so entries are only appended, never reordered (a wider mask is
// still a JSON number).
const _: () = assert!(LOOK_ALIKES.len() <= 8);

/// The probability a language's letter needs at a step whose best is its look-alike: where the
/// look-alike was right, the letter's stayed under 0.018 on every page (under 0.003 for `ı`);
/// where the letter was meant, it was 0.075–0.49 for `ą` and `ę` and above 0.02 at 137 of
/// the Turkish pages' 146 `ı` read as `i`.
const LOOK_ALIKE_SHARE: f32 = 0.02;

/// The probability of a curly quote, where the recognizer's best is `"`, from which the
/// curly one is read.
const CURLY_QUOTE_SHARE: f32 = 0.1;

/// The median share of `’` over a page's apostrophes (its probability against `'`'s, at each
/// step whose best is either) from which the page's apostrophes are typographic: the French
/// pages, printed with `’`, had medians of 0.14–0.51; the Italian ones, printed with `'`, 0–0.04.
const TYPOGRAPHIC_APOSTROPHE_SHARE: f32 = 0.1;

/// Which look-alikes a page of `languages` reads its letters for: bit `i` for entry `i`.
pub(crate) fn look_alikes_for<S: AsRef<str>>(languages: &[S]) -> u8 {
    LOOK_ALIKES
        .iter()
        .enumerate()
        .filter(|(_, (language, ..))| languages.iter().any(|code| code.as_ref() == *language))
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

/// The classes of the quotes, the apostrophes and the look-alikes in one recognizer's dictionary.
#[derive(Debug, Clone, Default)]
pub(crate) struct LetterClasses {
    /// (the look-alike's bit, the class read, the class meant), for pairs the dictionary holds.
    look_alikes: Vec<(u8, usize, usize)>,
    /// The classes of `'` and `’`.
    apostrophes: Option<(usize, usize)>,
    /// The class of `"`, and those of `“` and `”`.
    straight_quote: Option<usize>,
    curly_quotes: Vec<usize>,
}

impl LetterClasses {
    /// The classes in a dictionary whose class `i` is `characters[i]`.
    pub(crate) fn new(characters: &[char]) -> Self {
        let class = |wanted: char| characters.iter().position(|&c| c == wanted);
        let look_alikes = LOOK_ALIKES
            .iter()
            .enumerate()
            .filter_map(|(i, &(_, read, meant))| Some((1 << i, class(read)?, class(meant)?)))
            .collect();
        let curly_quotes = ['“', '”'].into_iter().filter_map(class).collect();
        Self { look_alikes, apostrophes: class('\'').zip(class('’')), straight_quote: class('"'), curly_quotes }
    }

    /// The class read at a step whose best class is `best`: for `"`, the likelier curly quote
    /// where it has at least [`CURLY_QUOTE_SHARE`]; for a look-alike of a letter one of the
    /// page's languages (`mask`, from [`look_alikes_for`]) writes, the letter where it has at
    /// least [`LOOK_ALIKE_SHARE`] (the likelier, when two do); else `best`.
    pub(crate) fn meant(&self, best: usize, step: &[f32], mask: u8) -> usize {
        if Some(best) == self.straight_quote {
            return likeliest(step, self.curly_quotes.iter().copied(), CURLY_QUOTE_SHARE).unwrap_or(best);
        }
        let letters = self.look_alikes.iter().filter(|&&(bit, read, _)| read == best && mask & bit != 0);
        likeliest(step, letters.map(|&(_, _, meant)| meant), LOOK_ALIKE_SHARE).unwrap_or(best)
    }

    /// At a step whose best class is `'` or `’`, the share of `’` between the two.
    pub(crate) fn apostrophe_share(&self, best: usize, step: &[f32]) -> Option<f32> {
        let (straight, typographic) = self.apostrophes?;
        if best != straight && best != typographic {
            return None;
        }
        let (s, t) = (step.get(straight).copied().unwrap_or(0.0), step.get(typographic).copied().unwrap_or(0.0));
        (s + t > 0.0).then(|| t / (s + t))
    }
}

/// Of `classes`, the one `step` gives the highest probability, if at least `share`.
fn likeliest(step: &[f32], classes: impl Iterator<Item = usize>, share: f32) -> Option<usize> {
    classes
        .filter_map(|class| step.get(class).map(|&p| (class, p)))
        .filter(|&(_, p)| p >= share)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(class, _)| class)
}

/// Whether a page whose apostrophes' shares of `’` are `shares` prints them typographic: the
/// median share is at least [`TYPOGRAPHIC_APOSTROPHE_SHARE`]. A page without one: no.
pub(crate) fn typographic_apostrophes(shares: &mut [f32]) -> bool {
    if shares.is_empty() {
        return false;
    }
    shares.sort_by(f32::total_cmp);
    shares[shares.len() / 2] >= TYPOGRAPHIC_APOSTROPHE_SHARE
}

#[cfg(test)]
mod tests {
    use super::*;

    const DICTIONARY: [char; 12] = ['\0', 'a', 'ą', 'e', 'ę', 'i', 'ı', '\'', '’', '"', '“', '”'];

    fn step(probabilities: &[(char, f32)]) -> Vec<f32> {
        let mut step = vec![0.0; DICTIONARY.len()];
        for &(c, p) in probabilities {
            step[DICTIONARY.iter().position(|&d| d == c).expect("in the dictionary")] = p;
        }
        step
    }

    fn class(c: char) -> usize {
        DICTIONARY.iter().position(|&d| d == c).expect("in the dictionary")
    }

    #[test]
    fn a_language_s_letter_close_behind_its_look_alike_is_read_on_that_language_s_pages() {
        let classes = LetterClasses::new(&DICTIONARY);
        let polish = look_alikes_for(&["eng", "pol"]);
        let close = step(&[('a', 0.8), ('ą', 0.18)]);
        assert_eq!(classes.meant(class('a'), &close, polish), class('ą'));
        assert_eq!(classes.meant(class('a'), &close, look_alikes_for(&["eng"])), class('a'), "not a Polish page");
        assert_eq!(
            classes.meant(class('a'), &step(&[('a', 0.99), ('ą', 0.017)]), polish),
            class('a'),
            "too far behind"
        );
        let turkish = look_alikes_for(&["tur"]);
        assert_eq!(classes.meant(class('i'), &step(&[('i', 0.52), ('ı', 0.47)]), turkish), class('ı'));
        assert_eq!(classes.meant(class('i'), &step(&[('i', 0.52), ('ı', 0.47)]), polish), class('i'));
        assert_eq!(classes.meant(class('e'), &step(&[('e', 0.6), ('ę', 0.4)]), turkish), class('e'));
    }

    #[test]
    fn a_straight_quote_with_a_curly_one_close_behind_is_curly_on_every_page() {
        let classes = LetterClasses::new(&DICTIONARY);
        let close = step(&[('"', 0.6), ('“', 0.1), ('”', 0.3)]);
        assert_eq!(classes.meant(class('"'), &close, 0), class('”'));
        assert_eq!(classes.meant(class('"'), &step(&[('"', 0.95), ('“', 0.05)]), 0), class('"'));
    }

    #[test]
    fn a_look_alike_the_dictionary_lacks_is_never_read() {
        let classes = LetterClasses::new(&['\0', 'i', 'a']);
        assert_eq!(classes.meant(1, &[0.0, 0.5, 0.5], look_alikes_for(&["tur", "pol"])), 1);
        assert_eq!(classes.apostrophe_share(1, &[0.0, 1.0, 0.0]), None);
    }

    #[test]
    fn a_page_s_apostrophes_are_typographic_when_most_lean_that_way() {
        let classes = LetterClasses::new(&DICTIONARY);
        let share = classes.apostrophe_share(class('\''), &step(&[('\'', 0.75), ('’', 0.25)])).expect("an apostrophe");
        assert!((share - 0.25).abs() < 1e-6);
        assert_eq!(classes.apostrophe_share(class('a'), &step(&[('a', 0.9), ('’', 0.1)])), None);
        assert!(typographic_apostrophes(&mut [0.3, 0.05, 0.2]), "French pages: most near a fifth");
        assert!(!typographic_apostrophes(&mut [0.3, 0.01, 0.0, 0.04]), "Italian pages: most near nothing");
        assert!(!typographic_apostrophes(&mut []));
    }
}
