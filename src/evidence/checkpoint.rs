//! C2SP transparency-log checkpoints (<https://c2sp.org/tlog-checkpoint>): the body of a
//! signed note that names a log (its **origin**), a tree size and the RFC 6962 root hash of
//! the log's first `size` leaves, with optional extension lines.
//!
//! ```text
//! example.com/log
//! 20852163
//! CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=
//!
//! — example.com/log Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
//! ```
//!
//! [`Checkpoint::to_text`] writes the body, [`Checkpoint::parse`] reads one strictly (size in
//! decimal without leading zeros, root in canonical base64 of exactly 32 bytes, non-empty
//! lines without control characters: what it accepts, `to_text` prints back byte for byte),
//! [`Checkpoint::sign`] makes the signed note, and [`Checkpoint::open`] verifies a
//! signed note with the log's key (and any witnesses' keys) before it reads the body: a
//! checkpoint's text means nothing until its signature has been checked.

use super::base64;
use super::merkle::Hash;
use super::note::{MAX_NOTE_BYTES, Note, NoteError, SignerKey, VerifierKey};

/// The most extension lines a checkpoint may have.
pub const MAX_EXTENSIONS: usize = 16;

/// A log's tree head: its origin, its size and its root hash, and extension lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The log's identity: non-empty, one line.
    pub origin: String,
    /// How many leaves the tree has.
    pub size: u64,
    /// The RFC 6962 root hash of those leaves.
    pub root: Hash,
    /// Extension lines (opaque, each non-empty; the specification advises against them).
    pub extensions: Vec<String>,
}

/// Why a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The note around it was refused (form or signatures).
    #[error("{0}")]
    Note(#[from] NoteError),
    /// Fewer than three lines, or a text that does not end in a newline.
    #[error(
        "a checkpoint is at least three lines (origin, size, root hash), each ending in a newline"
    )]
    TooFewLines,
    /// The origin line is empty.
    #[error("the checkpoint's origin (first line) is empty")]
    EmptyOrigin,
    /// The size is not a decimal number without leading zeros that fits in 64 bits.
    #[error("the checkpoint's tree size {0:?} is not a decimal number without leading zeros")]
    Size(String),
    /// The root hash is not canonical standard base64.
    #[error("the checkpoint's root hash {0:?} is not standard base64")]
    RootBase64(String),
    /// The root hash is not 32 bytes.
    #[error("the checkpoint's root hash has {0} bytes, not 32")]
    RootLength(usize),
    /// An empty extension line (or an empty line anywhere in the body).
    #[error("line {0} of the checkpoint is empty; extension lines must not be")]
    EmptyLine(usize),
    /// A control character (other than the newlines between lines) in a line.
    #[error("line {0} of the checkpoint has a control character")]
    ControlCharacter(usize),
    /// More than [`MAX_EXTENSIONS`] extension lines.
    #[error("the checkpoint has more than {0} extension lines")]
    TooManyExtensions(usize),
    /// A field for a new checkpoint that would not make a valid body (a newline or a control
    /// character in the origin or an extension, or an empty one).
    #[error("the checkpoint's {0} must be one non-empty line without control characters")]
    BadField(&'static str),
}

fn one_line(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(char::is_control)
}

impl Checkpoint {
    /// The note text: origin, size, base64 root and extension lines, each with a newline.
    pub fn to_text(&self) -> Result<String, CheckpointError> {
        if !one_line(&self.origin) {
            return Err(CheckpointError::BadField("origin"));
        }
        if self.extensions.len() > MAX_EXTENSIONS {
            return Err(CheckpointError::TooManyExtensions(MAX_EXTENSIONS));
        }
        if !self.extensions.iter().all(|e| one_line(e)) {
            return Err(CheckpointError::BadField("extension line"));
        }
        let mut text = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            base64::encode(&self.root)
        );
        for e in &self.extensions {
            text.push_str(e);
            text.push('\n');
        }
        if text.len() > MAX_NOTE_BYTES {
            return Err(CheckpointError::Note(NoteError::MalformedText));
        }
        Ok(text)
    }

    /// Reads a checkpoint body (a note's text). Strict: see the module documentation.
    pub fn parse(text: &str) -> Result<Self, CheckpointError> {
        let body = text
            .strip_suffix('\n')
            .ok_or(CheckpointError::TooFewLines)?;
        let lines: Vec<&str> = body.split('\n').collect();
        if lines.len() < 3 {
            return Err(CheckpointError::TooFewLines);
        }
        if lines.len() > 3 + MAX_EXTENSIONS {
            return Err(CheckpointError::TooManyExtensions(MAX_EXTENSIONS));
        }
        if let Some(i) = lines.iter().position(|l| l.chars().any(char::is_control)) {
            return Err(CheckpointError::ControlCharacter(i + 1));
        }
        if let Some(i) = lines.iter().position(|l| l.is_empty()) {
            return Err(if i == 0 {
                CheckpointError::EmptyOrigin
            } else {
                CheckpointError::EmptyLine(i + 1)
            });
        }
        let size_line = lines[1];
        let canonical = size_line == "0"
            || (size_line.bytes().all(|b| b.is_ascii_digit()) && !size_line.starts_with('0'));
        let size = if canonical {
            size_line.parse::<u64>().ok()
        } else {
            None
        }
        .ok_or_else(|| CheckpointError::Size(size_line.to_owned()))?;
        let raw = base64::decode(lines[2])
            .ok_or_else(|| CheckpointError::RootBase64(lines[2].to_owned()))?;
        let root: Hash = raw
            .as_slice()
            .try_into()
            .map_err(|_| CheckpointError::RootLength(raw.len()))?;
        Ok(Self {
            origin: lines[0].to_owned(),
            size,
            root,
            extensions: lines[3..].iter().map(|&l| l.to_owned()).collect(),
        })
    }

    /// The signed note of this checkpoint, signed by `signer` (the log's key).
    pub fn sign(&self, signer: &SignerKey) -> Result<Note, CheckpointError> {
        let mut note = Note::new(&self.to_text()?)?;
        note.sign(signer)?;
        Ok(note)
    }

    /// [`Checkpoint::sign`] with a nonce made ahead, off the caller's time (a runtime's
    /// seal inside a commit).
    pub(crate) fn sign_ahead(
        &self,
        signer: &crate::evidence::note::ahead::AheadSigner,
    ) -> Result<Note, CheckpointError> {
        let mut note = Note::new(&self.to_text()?)?;
        note.sign_ahead(signer)?;
        Ok(note)
    }

    /// Verifies a signed checkpoint note with the log's key and every key in `witnesses` (each
    /// signature required; signatures by other keys ignored), then reads its body.
    pub fn open(
        note: &[u8],
        log: &VerifierKey,
        witnesses: &[VerifierKey],
    ) -> Result<(Self, Note), CheckpointError> {
        let parsed = Note::parse(note)?;
        let mut required = Vec::with_capacity(1 + witnesses.len());
        required.push(log.clone());
        required.extend_from_slice(witnesses);
        parsed.verify_all(&required)?;
        let checkpoint = Self::parse(parsed.text())?;
        Ok((checkpoint, parsed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::merkle::{EMPTY_ROOT, leaf_hash, root};

    const SPEC: &str =
        "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";

    #[test]
    fn the_specifications_example_reads_and_prints_back() {
        let c = Checkpoint::parse(SPEC).unwrap();
        assert_eq!(c.origin, "example.com/behind-the-sofa");
        assert_eq!(c.size, 20_852_163);
        assert_eq!(c.to_text().unwrap(), SPEC);
        let with_ext = format!("{SPEC}ext one\nanother\n");
        let c = Checkpoint::parse(&with_ext).unwrap();
        assert_eq!(c.extensions, ["ext one", "another"]);
        assert_eq!(c.to_text().unwrap(), with_ext);
    }

    #[test]
    fn malformed_bodies_get_their_own_error() {
        let root = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=";
        let cases: Vec<(String, CheckpointError)> = vec![
            (SPEC.trim_end().to_owned(), CheckpointError::TooFewLines),
            ("o\n1\n".into(), CheckpointError::TooFewLines),
            (format!("\n1\n{root}\n"), CheckpointError::EmptyOrigin),
            (
                format!("o\n01\n{root}\n"),
                CheckpointError::Size("01".into()),
            ),
            (
                format!("o\n+1\n{root}\n"),
                CheckpointError::Size("+1".into()),
            ),
            (
                format!("o\n-1\n{root}\n"),
                CheckpointError::Size("-1".into()),
            ),
            (
                format!("o\n 1\n{root}\n"),
                CheckpointError::Size(" 1".into()),
            ),
            (
                format!("o\n18446744073709551616\n{root}\n"),
                CheckpointError::Size("18446744073709551616".into()),
            ),
            (
                "o\n1\nnot base64\n".into(),
                CheckpointError::RootBase64("not base64".into()),
            ),
            ("o\n1\nAAAA\n".into(), CheckpointError::RootLength(3)),
            (
                format!("o\r\n1\n{root}\n"),
                CheckpointError::ControlCharacter(1),
            ),
            (
                format!("o\n1\n{root}\nx\ty\n"),
                CheckpointError::ControlCharacter(4),
            ),
            (format!("o\n1\n{root}\n\n"), CheckpointError::EmptyLine(4)),
            (
                format!("o\n1\n{root}\na\n\nb\n"),
                CheckpointError::EmptyLine(5),
            ),
            (
                format!("o\n1\n{root}\n{}", "e\n".repeat(MAX_EXTENSIONS + 1)),
                CheckpointError::TooManyExtensions(MAX_EXTENSIONS),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Checkpoint::parse(&text), Err(want), "{text:?}");
        }
        assert_eq!(
            Checkpoint::parse(&format!("o\n0\n{}\n", base64::encode(&EMPTY_ROOT)))
                .unwrap()
                .size,
            0
        );
        let bad = Checkpoint {
            origin: "two\nlines".into(),
            size: 1,
            root: EMPTY_ROOT,
            extensions: vec![],
        };
        assert_eq!(bad.to_text(), Err(CheckpointError::BadField("origin")));
    }

    #[test]
    fn signed_by_the_log_and_cosigned_by_a_witness() {
        let log = SignerKey::generate("example.com/log").unwrap();
        let witness = SignerKey::generate("example.com/witness").unwrap();
        let leaves: Vec<_> = (0..5u8).map(|i| leaf_hash(&[i])).collect();
        let c = Checkpoint {
            origin: "example.com/log".into(),
            size: 5,
            root: root(&leaves),
            extensions: vec![],
        };
        let mut note = c.sign(&log).unwrap();
        let bytes = note.to_text();
        let (read, _) = Checkpoint::open(bytes.as_bytes(), &log.verifier(), &[]).unwrap();
        assert_eq!(read, c);
        // Requiring the witness before it cosigned fails by name.
        assert!(matches!(
            Checkpoint::open(bytes.as_bytes(), &log.verifier(), &[witness.verifier()]),
            Err(CheckpointError::Note(NoteError::MissingSignature { .. }))
        ));
        note.sign(&witness).unwrap();
        let cosigned = note.to_text();
        Checkpoint::open(cosigned.as_bytes(), &log.verifier(), &[witness.verifier()]).unwrap();
        // Another key under the log's name verifies nothing.
        let impostor = SignerKey::generate("example.com/log").unwrap();
        assert!(matches!(
            Checkpoint::open(cosigned.as_bytes(), &impostor.verifier(), &[]),
            Err(CheckpointError::Note(NoteError::NoKnownSignature { .. }))
        ));
        // A rewritten size under the old signature is refused.
        let forged = cosigned.replacen("\n5\n", "\n6\n", 1);
        assert!(matches!(
            Checkpoint::open(forged.as_bytes(), &log.verifier(), &[]),
            Err(CheckpointError::Note(NoteError::InvalidSignature { .. }))
        ));
    }
}
