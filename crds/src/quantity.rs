//! Kubernetes resource quantities (`1Gi`, `500Mi`, `1.5`, `100m`, `1e3`), parsed and compared
//! exactly.
//!
//! The grammar is the API server's (`k8s.io/apimachinery/pkg/api/resource`):
//!
//! ```text
//! <quantity>        ::= <signedNumber><suffix>
//! <signedNumber>    ::= <number> | <sign><number>
//! <sign>            ::= "+" | "-"
//! <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//! <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//! <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//! <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>
//! ```
//!
//! One deliberate difference: the API server reads a bare sign (`-`, `+`) as zero; here a
//! number needs at least one digit.
//!
//! Values are kept as an exact decimal (significant digits and a power of ten), so `1Gi`
//! equals `1073741824`, `1500m` equals `1.5`, and no comparison suffers floating-point error
//! or overflow, whatever the exponent.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("a quantity cannot be empty")]
    Empty,
    /// No digit where the number should be.
    #[error("{0:?} does not start with a number")]
    NoNumber(String),
    /// Text after the number that is neither a unit suffix nor a decimal exponent.
    #[error(
        "{suffix:?} in {input:?} is not a quantity suffix (Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent such as e3)"
    )]
    Suffix {
        /// The whole input.
        input: String,
        /// The part after the number.
        suffix: String,
    },
}

/// An exactly represented quantity. Equality and ordering are numeric: `1Gi == 1024Mi`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity {
    negative: bool,
    /// Significant decimal digits (0..=9), most significant first, with neither leading nor
    /// trailing zeros; empty for zero. Normalizing makes the derived equality numeric.
    digits: Vec<u8>,
    /// The value is `digits × 10^exponent`.
    exponent: i64,
}

impl Quantity {
    /// Parses a quantity string such as `1Gi`, `500Mi`, `1.5`, `100m` or `1e3`.
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        if input.is_empty() {
            return Err(QuantityError::Empty);
        }
        let (negative, unsigned) = match input.as_bytes()[0] {
            b'-' => (true, &input[1..]),
            b'+' => (false, &input[1..]),
            _ => (false, input),
        };
        let (integer, rest) = split_digits(unsigned);
        let (fraction, suffix) = match rest.strip_prefix('.') {
            Some(after_dot) => split_digits(after_dot),
            None => ("", rest),
        };
        if integer.is_empty() && fraction.is_empty() {
            return Err(QuantityError::NoNumber(input.to_owned()));
        }
        let multiplier = Multiplier::parse(suffix).ok_or_else(|| QuantityError::Suffix {
            input: input.to_owned(),
            suffix: suffix.to_owned(),
        })?;

        let mut digits: Vec<u8> = integer
            .bytes()
            .chain(fraction.bytes())
            .map(|b| b - b'0')
            .collect();
        // Bounded by the input's length, so it cannot overflow.
        let mut exponent = -(fraction.len() as i64);
        match multiplier {
            Multiplier::Decimal(power) => exponent += i64::from(power),
            Multiplier::Binary(power_of_1024) => {
                for _ in 0..power_of_1024 {
                    multiply_small(&mut digits, 1024);
                }
            }
        }
        Ok(Self::normalized(negative, digits, exponent))
    }

    /// The quantity zero.
    pub fn zero() -> Self {
        Self {
            negative: false,
            digits: Vec::new(),
            exponent: 0,
        }
    }

    /// `-1`, `0` or `1`.
    pub fn signum(&self) -> i8 {
        match (self.digits.is_empty(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// Strictly greater than zero.
    pub fn is_positive(&self) -> bool {
        self.signum() > 0
    }

    fn normalized(negative: bool, mut digits: Vec<u8>, mut exponent: i64) -> Self {
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent += 1;
        }
        if digits.is_empty() {
            return Self::zero();
        }
        Self {
            negative,
            digits,
            exponent,
        }
    }

    /// Compares absolute values of two non-zero quantities.
    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        // Position of the leading digit: with no leading zeros, a higher one is a bigger number.
        let magnitude = |q: &Self| q.digits.len() as i64 + q.exponent;
        magnitude(self)
            .cmp(&magnitude(other))
            // Same leading position: digit by digit. With no trailing zeros, when one digit
            // string is a prefix of the other the longer one has more non-zero digits, which
            // is exactly how slices order.
            .then_with(|| self.digits.cmp(&other.digits))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.signum().cmp(&other.signum()) {
            Ordering::Equal => match self.signum() {
                0 => Ordering::Equal,
                1 => self.cmp_magnitude(other),
                _ => other.cmp_magnitude(self),
            },
            unequal => unequal,
        }
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Renders the exact value in plain decimal notation, for example `1073741824` or `0.5`, or, for
/// extreme exponents, as `<digits>e<exponent>` (not the API server's canonical form, which
/// prefers suffixes). Either way the text parses back to the same quantity.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// Beyond this many padding zeros, exponent notation keeps the text short.
        const MAX_PADDING: i64 = 40;
        if self.digits.is_empty() {
            return f.write_str("0");
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.negative { "-" } else { "" };
        let padding = (-self.exponent - digits.len() as i64).max(self.exponent);
        if padding > MAX_PADDING {
            return write!(f, "{sign}{digits}e{}", self.exponent);
        }
        if self.exponent >= 0 {
            let zeros = "0".repeat(usize::try_from(self.exponent).unwrap_or(0));
            return write!(f, "{sign}{digits}{zeros}");
        }
        let fraction_len = usize::try_from(-self.exponent).unwrap_or(0);
        if fraction_len >= digits.len() {
            let zeros = "0".repeat(fraction_len - digits.len());
            write!(f, "{sign}0.{zeros}{digits}")
        } else {
            let (integer, fraction) = digits.split_at(digits.len() - fraction_len);
            write!(f, "{sign}{integer}.{fraction}")
        }
    }
}

/// What the suffix multiplies the number by.
enum Multiplier {
    /// `10^n`.
    Decimal(i32),
    /// `1024^n`.
    Binary(u32),
}

impl Multiplier {
    fn parse(suffix: &str) -> Option<Self> {
        let multiplier = match suffix {
            "" => Self::Decimal(0),
            "n" => Self::Decimal(-9),
            "u" => Self::Decimal(-6),
            "m" => Self::Decimal(-3),
            "k" => Self::Decimal(3),
            "M" => Self::Decimal(6),
            "G" => Self::Decimal(9),
            "T" => Self::Decimal(12),
            "P" => Self::Decimal(15),
            "E" => Self::Decimal(18),
            "Ki" => Self::Binary(1),
            "Mi" => Self::Binary(2),
            "Gi" => Self::Binary(3),
            "Ti" => Self::Binary(4),
            "Pi" => Self::Binary(5),
            "Ei" => Self::Binary(6),
            _ => return Self::exponent(suffix),
        };
        Some(multiplier)
    }

    /// `e3`, `E-2`, `e+6`: the API server takes a 32-bit signed exponent.
    fn exponent(suffix: &str) -> Option<Self> {
        let rest = suffix
            .strip_prefix('e')
            .or_else(|| suffix.strip_prefix('E'))?;
        rest.parse::<i32>().ok().map(Self::Decimal)
    }
}

/// Splits a leading run of ASCII digits from the rest.
fn split_digits(s: &str) -> (&str, &str) {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at(end)
}

/// `digits *= factor`, in place, on a most-significant-first decimal digit vector.
fn multiply_small(digits: &mut Vec<u8>, factor: u32) {
    let mut carry: u32 = 0;
    for digit in digits.iter_mut().rev() {
        let product = u32::from(*digit) * factor + carry;
        *digit = (product % 10) as u8;
        carry = product / 10;
    }
    let mut prefix = Vec::new();
    while carry > 0 {
        prefix.push((carry % 10) as u8);
        carry /= 10;
    }
    prefix.reverse();
    digits.splice(0..0, prefix);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn accepts_the_grammar() {
        for s in [
            "0",
            "1",
            "+1",
            "-1",
            "1.",
            ".5",
            "1.5",
            "007",
            "1Ki",
            "1Mi",
            "1Gi",
            "1Ti",
            "1Pi",
            "1Ei",
            "1n",
            "1u",
            "1m",
            "1k",
            "1M",
            "1G",
            "1T",
            "1P",
            "1E",
            "1e3",
            "1E3",
            "1e-3",
            "1e+3",
            "1.5Gi",
            "0.5Mi",
            "1e0",
            "12345678901234567890123456789Ei",
        ] {
            assert!(Quantity::parse(s).is_ok(), "{s} should parse");
        }
    }

    #[test]
    fn rejects_what_the_api_server_rejects() {
        for s in [
            "",
            "Gi",
            "1Gx",
            "1K",
            "1gi",
            "1mi",
            "1 Gi",
            " 1",
            "1 ",
            "1e",
            "1e+",
            "1e1.5",
            "1.5.5",
            "1..5",
            "abc",
            "1Gi1",
            "1i",
            "0x10",
            "1e99999999999",
            "--1",
            "+-1",
            "-",
            ".",
            "1ee3",
            "1e3Gi",
        ] {
            assert!(Quantity::parse(s).is_err(), "{s:?} should not parse");
        }
    }

    #[test]
    fn error_messages_name_the_problem() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert_eq!(
            QuantityError::Empty.to_string(),
            "a quantity cannot be empty"
        );
        assert_eq!(
            Quantity::parse("Gi"),
            Err(QuantityError::NoNumber("Gi".into()))
        );
        let suffix = Quantity::parse("1Gx");
        assert_eq!(
            suffix,
            Err(QuantityError::Suffix {
                input: "1Gx".into(),
                suffix: "Gx".into()
            })
        );
        assert!(suffix.err().is_some_and(|e| {
            e.to_string()
                .starts_with(r#""Gx" in "1Gx" is not a quantity suffix"#)
        }));
    }

    #[test]
    fn equal_values_in_different_notations() {
        let same = [
            ("1Gi", "1073741824"),
            ("1Gi", "1024Mi"),
            ("1Ki", "1024"),
            ("1.5Gi", "1536Mi"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("1E3", "1000"),
            ("1500m", "1.5"),
            ("0.001", "1m"),
            ("1e-3", "1m"),
            ("1000n", "1u"),
            ("0", "0Gi"),
            ("0", "-0"),
            ("0.000", "0e9"),
            ("1.", "1"),
            (".5", "500m"),
            ("+2", "2"),
            ("007", "7"),
            ("1Ei", "1152921504606846976"),
            ("2E", "2e18"),
        ];
        for (a, b) in same {
            assert_eq!(q(a), q(b), "{a} == {b}");
            assert_eq!(q(a).cmp(&q(b)), Ordering::Equal, "{a} cmp {b}");
        }
    }

    #[test]
    fn ordering_is_exact() {
        let ascending = [
            "-1Gi",
            "-1G",
            "-1",
            "-1m",
            "0",
            "1n",
            "1m",
            "999m",
            "1",
            "1.000000000000000000001",
            "999",
            "1k",
            "1000.000001",
            "1Ki",
            "1M",
            "1Mi",
            "999999999",
            "1G",
            "1073741823",
            "1Gi",
            "1073741825",
            "1T",
            "1Ti",
            "1E",
            "1Ei",
            "1e19",
            "1e2147483647",
        ];
        for pair in ascending.windows(2) {
            assert!(q(pair[0]) < q(pair[1]), "{} < {}", pair[0], pair[1]);
            assert!(q(pair[1]) > q(pair[0]), "{} > {}", pair[1], pair[0]);
        }
    }

    #[test]
    fn sign_helpers() {
        assert!(q("1m").is_positive());
        assert!(!q("0Gi").is_positive());
        assert!(!q("-1").is_positive());
        assert_eq!(q("-5Gi").signum(), -1);
        assert_eq!(q("-0").signum(), 0);
        assert_eq!(Quantity::zero(), q("0"));
    }

    #[test]
    fn display_is_the_exact_decimal() {
        for (input, shown) in [
            ("1Gi", "1073741824"),
            ("1.5", "1.5"),
            ("100m", "0.1"),
            ("1n", "0.000000001"),
            ("-2k", "-2000"),
            ("0Gi", "0"),
            ("12.50", "12.5"),
            ("1e2147483647", "1e2147483647"),
            ("-15e-60", "-15e-60"),
        ] {
            assert_eq!(q(input).to_string(), shown, "{input}");
        }
    }

    #[test]
    fn from_str_is_parse() {
        assert_eq!("2Gi".parse::<Quantity>(), Quantity::parse("2Gi"));
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        const BINARY: [(&str, u32); 4] = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4)];

        proptest! {
            #[test]
            fn binary_suffix_is_a_power_of_1024(n in 0u64..1_000_000, i in 0usize..4) {
                let (suffix, power) = BINARY[i];
                let bytes = u128::from(n) * 1024u128.pow(power);
                prop_assert_eq!(q(&format!("{n}{suffix}")), q(&bytes.to_string()));
            }

            #[test]
            fn order_matches_integer_order(a in any::<i64>(), b in any::<i64>()) {
                prop_assert_eq!(q(&a.to_string()).cmp(&q(&b.to_string())), a.cmp(&b));
            }

            #[test]
            fn milli_notation_matches_integer_order(a in any::<i64>(), b in any::<i64>()) {
                // a milli-units against b milli-units written as a decimal fraction.
                let decimal = format!(
                    "{}{}.{:03}",
                    if b < 0 { "-" } else { "" },
                    (i128::from(b) / 1000).abs(),
                    (i128::from(b) % 1000).abs()
                );
                prop_assert_eq!(q(&format!("{a}m")).cmp(&q(&decimal)), a.cmp(&b));
            }

            #[test]
            fn display_parses_back(digits in "[0-9]{1,12}", exponent in -60i32..60) {
                let original = q(&format!("{digits}e{exponent}"));
                prop_assert_eq!(q(&original.to_string()), original);
            }

            #[test]
            fn never_panics(s in "\\PC{0,24}") {
                let _ = Quantity::parse(&s);
            }
        }
    }
}
