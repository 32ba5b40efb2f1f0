//! Numbers: exact integers within ±2^53, and finite doubles written as ECMAScript
//! `Number.prototype.toString` writes them (RFC 8785 section 3.2.2.3).

use serde_json::Number;

use super::{CanonicalError, Integers, MAX_SAFE_MAGNITUDE, Sink};

/// Writes a number: exact integers within ±2^53, ECMAScript form for doubles.
pub(super) fn write_number<S: Sink>(
    number: &Number,
    sink: &mut S,
    integers: Integers,
) -> Result<(), CanonicalError> {
    let magnitude_and_sign = if let Some(unsigned) = number.as_u64() {
        Some((unsigned, false))
    } else {
        number
            .as_i64()
            .map(|signed| (signed.unsigned_abs(), signed < 0))
    };
    if let Some((magnitude, negative)) = magnitude_and_sign {
        if magnitude > MAX_SAFE_MAGNITUDE
            && integers == Integers::Safe
            && !is_double_text(magnitude)
        {
            let value = i128::from(magnitude);
            return Err(CanonicalError::UnsafeInteger {
                value: if negative { -value } else { value },
            });
        }
        if negative {
            sink.put("-");
        }
        sink.put(&magnitude.to_string());
        return Ok(());
    }
    match number.as_f64() {
        Some(double) if double.is_finite() => {
            write_double(double, sink);
            Ok(())
        }
        _ if integers == Integers::Lenient => {
            sink.put(&number.to_string());
            Ok(())
        }
        _ => Err(CanonicalError::NonFinite {
            text: number.to_string(),
        }),
    }
}

/// Whether `magnitude`'s decimal digits are exactly what ECMAScript writes for the double
/// nearest to it: then the integer *is* that double's canonical text (this module wrote
/// it so, for a double above 2^53), and writing it changes nothing.
fn is_double_text(magnitude: u64) -> bool {
    #[expect(
        clippy::cast_precision_loss,
        reason = "the nearest double is the point: the text is kept only if it names it exactly"
    )]
    let nearest = magnitude as f64;
    let mut written = String::new();
    write_double(nearest, &mut written);
    written == magnitude.to_string()
}

/// Writes a finite double as ECMAScript `Number.prototype.toString` does
/// (ECMA-262, `Number::toString`, radix 10).
pub(super) fn write_double<S: Sink>(double: f64, sink: &mut S) {
    if double == 0.0 {
        // Both +0 and -0.
        sink.put("0");
        return;
    }
    if double < 0.0 {
        sink.put("-");
    }
    let (digits, exponent) = shortest_digits(double.abs());
    let k = i32::try_from(digits.len()).expect("a double has at most 17 significant digits");
    let n = exponent + 1;
    if k <= n && n <= 21 {
        // Integer: the digits, then n - k zeros.
        sink.put(&digits);
        sink.put(&"0".repeat(usize::try_from(n - k).expect("n >= k")));
    } else if 0 < n && n <= 21 {
        // The decimal point falls inside the digits.
        let split = usize::try_from(n).expect("n > 0");
        sink.put(&digits[..split]);
        sink.put(".");
        sink.put(&digits[split..]);
    } else if -6 < n && n <= 0 {
        // Small: "0.", -n zeros, the digits.
        sink.put("0.");
        sink.put(&"0".repeat(usize::try_from(-n).expect("n <= 0")));
        sink.put(&digits);
    } else {
        // Exponent form: d[.ddd]e±(n - 1).
        sink.put(&digits[..1]);
        if k > 1 {
            sink.put(".");
            sink.put(&digits[1..]);
        }
        sink.put(if n - 1 < 0 { "e-" } else { "e+" });
        sink.put(&(n - 1).unsigned_abs().to_string());
    }
}

/// The ECMAScript digits `s` (no leading or trailing zeros) and decimal
/// exponent (`n - 1` in ECMA-262's terms) of a finite double `x > 0`.
///
/// ECMAScript wants the fewest digits that round-trip; among those, the one
/// closest to `x`; and if two are equally close, the one with the even last
/// digit. Rust's `{:e}` gives the fewest digits and the closest, but breaks an
/// exact tie away from zero (0x43143ff3c1cb0959 is exactly 1424953923781206.25:
/// Rust writes `…206.3`, ECMAScript `…206.2`), so ties are re-broken here.
fn shortest_digits(x: f64) -> (String, i32) {
    let (digits, exponent) = split_scientific(&format!("{x:e}"));
    let last_is_odd = digits.bytes().last().is_some_and(|digit| digit % 2 == 1);
    if last_is_odd && let Some(even) = even_tie_partner(x, &digits, exponent) {
        return (even, exponent);
    }
    (digits, exponent)
}

/// If `x` lies exactly halfway between `digits` and its neighbour in the last
/// place, and that neighbour also round-trips to `x`, the neighbour.
fn even_tie_partner(x: f64, digits: &str, exponent: i32) -> Option<String> {
    let k = digits.len();
    // The exact decimal value of `x`: no finite double has more than 767
    // significant digits, and Rust prints exact digits at any precision.
    let (exact, exact_exponent) = split_scientific(&format!("{x:.800e}"));
    // `x` is a tie exactly when its expansion is `prefix` (k digits, aligned
    // with `digits`), then a single 5, then nothing.
    if exact_exponent != exponent {
        return None;
    }
    let (prefix, rest) = exact.split_at_checked(k)?;
    let mut rest = rest.bytes();
    if rest.next() != Some(b'5') || !rest.all(|digit| digit == b'0') {
        return None;
    }
    let partner = if prefix == digits {
        // `digits` was rounded down, so the partner is one more in the last
        // place; `digits` ends in an odd digit, so 9 would carry into a shorter
        // string that Rust would already have preferred if it round-tripped.
        let (head, last) = prefix.split_at(k - 1);
        let last = last.bytes().next()?;
        if last == b'9' {
            return None;
        }
        format!("{head}{}", char::from(last + 1))
    } else {
        prefix.to_owned()
    };
    let unit_exponent = exponent - i32::try_from(k).ok()? + 1;
    let round_trips = format!("{partner}e{unit_exponent}").parse::<f64>() == Ok(x);
    round_trips.then_some(partner)
}

/// Splits Rust `{:e}` output into its significant digits (without the point,
/// trailing zeros removed) and its exponent.
fn split_scientific(scientific: &str) -> (String, i32) {
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` output always has an exponent");
    let exponent = exponent
        .parse()
        .expect("`{:e}` exponent is a decimal integer");
    let mut digits: String = mantissa.chars().filter(|&c| c != '.').collect();
    let significant = digits.trim_end_matches('0').len().max(1);
    digits.truncate(significant);
    (digits, exponent)
}
