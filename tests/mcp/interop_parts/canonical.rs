//! Canonical JSON against an independent RFC 8785 implementation (issue 30, item 3): every
//! value of the fuzzer's canonical corpus (`fuzz/seeds/canonical`), canonicalised by rpr and
//! by the PyPI package `rfc8785` (Trail of Bits, pinned in `.ci/install-peers`), byte for byte.
//! A value the other implementation refuses (an integer beyond 2^53, which RFC 8785 cannot
//! represent exactly) must be one rpr writes as the nearest double, and is counted apart.

use std::path::Path;
use std::process::Command;

use super::interop_support::peers;

const DIFF: &str = r#"
import json, sys, rfc8785
for path in sys.argv[1:]:
    try:
        value = json.loads(open(path, "rb").read())
        out = rfc8785.dumps(value).hex()
    except Exception as e:
        out = "refused:" + type(e).__name__
    print(out)
"#;

#[test]
fn canonical_json_matches_an_independent_rfc_8785_implementation_on_the_fuzz_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/canonical");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the canonical corpus")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    let ours: Vec<Option<String>> = files
        .iter()
        .map(|f| {
            let value: serde_json::Value =
                serde_json::from_slice(&std::fs::read(f).unwrap()).ok()?;
            rpr::canonical::to_string(&value).ok()
        })
        .collect();
    let out = Command::new(&peers().python)
        .args(["-c", DIFF])
        .args(&files)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(theirs.len(), files.len());
    let (mut same, mut refused) = (0, 0);
    for ((file, ours), theirs) in files.iter().zip(&ours).zip(&theirs) {
        let name = file.file_name().unwrap().to_string_lossy();
        match (ours, theirs.strip_prefix("refused:")) {
            (Some(ours), None) => {
                let theirs = (0..theirs.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&theirs[i..i + 2], 16).unwrap())
                    .collect::<Vec<u8>>();
                assert_eq!(
                    ours.as_bytes(),
                    theirs.as_slice(),
                    "{name}: rpr {ours} / rfc8785 {}",
                    String::from_utf8_lossy(&theirs)
                );
                same += 1;
            }
            (Some(_), Some(why)) => {
                // rfc8785 refuses integers it cannot hold exactly as a double; rpr writes them
                // as the nearest double (RFC 8785's number rule) only when the text says so.
                assert_eq!(why, "IntegerDomainError", "{name}: rfc8785 refused ({why})");
                refused += 1;
            }
            (None, None) => panic!("{name}: rpr refused what rfc8785 canonicalised"),
            (None, Some(_)) => refused += 1,
        }
    }
    eprintln!(
        "canonical differential: {same} identical, {refused} refused by one side, of {}",
        files.len()
    );
    assert!(same >= 10, "too small a corpus to compare: {same}");
}
