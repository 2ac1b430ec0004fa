//! What Go's `json.Unmarshal(data, &map[string]interface{}{})` says of some bytes, with its
//! exact error text: the check ValidateSecret makes of a `.dockerconfigjson`. The syntax check
//! is encoding/json's scanner (scanner.go), state for state; then the top-level value must be
//! an object (or null) to go into a map.

/// Where the scanner is inside nested values (scanner.go: parseState).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

/// The scanner's step functions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside a literal: the rest still expected (`rue` after `t`), and the whole word.
    Literal(&'static [u8], &'static str),
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// scanner.go quoteChar: the byte as a rune, quoted by strconv.Quote but in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        b'\\' => r"'\\'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x0b => r"'\v'".into(),
        0x00..=0x1f | 0x7f => format!(r"'\x{c:02x}'"),
        0x20..=0x7e => format!("'{}'", c as char),
        // Latin-1 as runes: C1 controls, no-break space and soft hyphen are not printable.
        0x80..=0xa0 | 0xad => format!(r"'\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

/// The syntax check (`checkValid`); Err is the SyntaxError's message.
fn check_valid(data: &[u8]) -> Result<(), String> {
    let mut stack: Vec<Parse> = Vec::new();
    let mut state = State::BeginValue;
    for &c in data {
        state = step(state, &mut stack, c)?;
    }
    // eof: a space ends a number or completes the top level; anything else is cut short.
    if state == State::EndTop {
        return Ok(());
    }
    match step(state, &mut stack, b' ') {
        Ok(State::EndTop) => Ok(()),
        _ => Err("unexpected end of JSON input".into()),
    }
}

fn error(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

fn step(state: State, stack: &mut Vec<Parse>, c: u8) -> Result<State, String> {
    Ok(match state {
        State::BeginValueOrEmpty if is_space(c) => state,
        State::BeginValueOrEmpty if c == b']' => end_value(stack, c)?,
        State::BeginValueOrEmpty => step(State::BeginValue, stack, c)?,
        State::BeginStringOrEmpty if is_space(c) => state,
        State::BeginStringOrEmpty if c == b'}' => {
            *stack.last_mut().expect("inside an object") = Parse::ObjectValue;
            end_value(stack, c)?
        }
        State::BeginStringOrEmpty => step(State::BeginString, stack, c)?,
        State::BeginString => match c {
            _ if is_space(c) => state,
            b'"' => State::InString,
            _ => return Err(error(c, "looking for beginning of object key string")),
        },
        State::BeginValue => match c {
            _ if is_space(c) => state,
            b'{' => {
                stack.push(Parse::ObjectKey);
                State::BeginStringOrEmpty
            }
            b'[' => {
                stack.push(Parse::ArrayValue);
                State::BeginValueOrEmpty
            }
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b'1'..=b'9' => State::One,
            b't' => State::Literal(b"rue", "true"),
            b'f' => State::Literal(b"alse", "false"),
            b'n' => State::Literal(b"ull", "null"),
            _ => return Err(error(c, "looking for beginning of value")),
        },
        State::EndValue => end_value(stack, c)?,
        State::EndTop if is_space(c) => state,
        State::EndTop => return Err(error(c, "after top-level value")),
        State::InString => match c {
            b'"' => State::EndValue,
            b'\\' => State::InStringEsc,
            0x00..=0x1f => return Err(error(c, "in string literal")),
            _ => state,
        },
        State::InStringEsc => match c {
            b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString,
            b'u' => State::InStringEscU(0),
            _ => return Err(error(c, "in string escape code")),
        },
        State::InStringEscU(n) => {
            if !c.is_ascii_hexdigit() {
                return Err(error(c, "in \\u hexadecimal character escape"));
            }
            if n == 3 {
                State::InString
            } else {
                State::InStringEscU(n + 1)
            }
        }
        State::Neg => match c {
            b'0' => State::Zero,
            b'1'..=b'9' => State::One,
            _ => return Err(error(c, "in numeric literal")),
        },
        State::One if c.is_ascii_digit() => state,
        State::One | State::Zero => match c {
            b'.' => State::Dot,
            b'e' | b'E' => State::E,
            _ => end_value(stack, c)?,
        },
        State::Dot if c.is_ascii_digit() => State::Dot0,
        State::Dot => return Err(error(c, "after decimal point in numeric literal")),
        State::Dot0 => match c {
            _ if c.is_ascii_digit() => state,
            b'e' | b'E' => State::E,
            _ => end_value(stack, c)?,
        },
        State::E if c == b'+' || c == b'-' => State::ESign,
        State::E | State::ESign if c.is_ascii_digit() => State::E0,
        State::E | State::ESign => return Err(error(c, "in exponent of numeric literal")),
        State::E0 if c.is_ascii_digit() => state,
        State::E0 => end_value(stack, c)?,
        State::Literal(rest, word) => {
            if c != rest[0] {
                let expecting = format!("in literal {word} (expecting '{}')", rest[0] as char);
                return Err(error(c, &expecting));
            }
            if rest.len() == 1 {
                State::EndValue
            } else {
                State::Literal(&rest[1..], word)
            }
        }
    })
}

/// stateEndValue: what may follow a complete value, by where it sits.
fn end_value(stack: &mut Vec<Parse>, c: u8) -> Result<State, String> {
    let Some(top) = stack.last_mut() else {
        return step(State::EndTop, stack, c);
    };
    if is_space(c) {
        return Ok(State::EndValue);
    }
    Ok(match (*top, c) {
        (Parse::ObjectKey, b':') => {
            *top = Parse::ObjectValue;
            State::BeginValue
        }
        (Parse::ObjectKey, _) => return Err(error(c, "after object key")),
        (Parse::ObjectValue, b',') => {
            *top = Parse::ObjectKey;
            State::BeginString
        }
        (Parse::ObjectValue | Parse::ArrayValue, b'}' | b']')
            if (c == b'}') == (*top == Parse::ObjectValue) =>
        {
            stack.pop();
            if stack.is_empty() {
                State::EndTop
            } else {
                State::EndValue
            }
        }
        (Parse::ObjectValue, _) => return Err(error(c, "after object key:value pair")),
        (Parse::ArrayValue, b',') => State::BeginValue,
        (Parse::ArrayValue, _) => return Err(error(c, "after array element")),
    })
}

/// `json.Unmarshal(data, &map[string]interface{}{})`: Ok, or Go's error text.
pub(crate) fn unmarshal_into_map(data: &[u8]) -> Result<(), String> {
    check_valid(data)?;
    let first = data
        .iter()
        .copied()
        .find(|c| !is_space(*c))
        .expect("valid JSON has a value");
    let kind = match first {
        b'{' | b'n' => return Ok(()),
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        _ => "number",
    };
    Err(format!(
        "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    ))
}

#[cfg(test)]
mod tests {
    use super::unmarshal_into_map as check;

    #[test]
    fn objects_and_null_go_into_a_map() {
        for ok in [
            r#"{"auths":{"h":{"auth":"QVdTOnB3"}}}"#,
            " { } \n",
            "null",
            r#"{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"],"b":{}}"#,
        ] {
            assert_eq!(check(ok.as_bytes()), Ok(()), "{ok}");
        }
    }

    #[test]
    fn errors_read_as_go_writes_them() {
        for (input, want) in [
            ("", "unexpected end of JSON input"),
            ("   ", "unexpected end of JSON input"),
            (r#"{"auths":"#, "unexpected end of JSON input"),
            (
                "not json",
                "invalid character 'o' in literal null (expecting 'u')",
            ),
            ("x", "invalid character 'x' looking for beginning of value"),
            (
                "{,}",
                "invalid character ',' looking for beginning of object key string",
            ),
            (r#"{"a" 1}"#, "invalid character '1' after object key"),
            (
                r#"{"a":1 "b":2}"#,
                "invalid character '\"' after object key:value pair",
            ),
            (
                r#"{"a":1,}"#,
                "invalid character '}' looking for beginning of object key string",
            ),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("[1}", "invalid character '}' after array element"),
            (
                r#"{"a":1]"#,
                "invalid character ']' after object key:value pair",
            ),
            ("{} x", "invalid character 'x' after top-level value"),
            ("{}}", "invalid character '}' after top-level value"),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            (r#""\x""#, "invalid character 'x' in string escape code"),
            (
                r#""\u12g4""#,
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            ("01", "invalid character '1' after top-level value"),
            (
                "\u{feff}{}",
                "invalid character 'ï' looking for beginning of value",
            ),
            (
                "'a'",
                "invalid character '\\'' looking for beginning of value",
            ),
            (
                "[]",
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                "\"s\"",
                "json: cannot unmarshal string into Go value of type map[string]interface {}",
            ),
            (
                "12",
                "json: cannot unmarshal number into Go value of type map[string]interface {}",
            ),
            (
                "true",
                "json: cannot unmarshal bool into Go value of type map[string]interface {}",
            ),
        ] {
            assert_eq!(check(input.as_bytes()), Err(want.to_owned()), "{input:?}");
        }
    }
}
