//! `calculator`: arithmetic a model gets wrong by itself, evaluated by a small
//! recursive-descent parser (no `eval`, bounded nesting).

use serde_json::{Value, json};

use super::{NativeTool, native, read_only};
use crate::bot::tools::FnTool;

pub(super) fn calculator() -> NativeTool {
    read_only(native(
        "calculator",
        "Evaluates an arithmetic expression with + - * / % ^ and parentheses, e.g. \"(2+3)*4^2\".",
        json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "minLength": 1, "maxLength": 1000,
                "description": "The expression to evaluate"}},
            "required": ["expression"],
            "additionalProperties": false
        }),
        FnTool(|args: Value| async move {
            let expression = args["expression"].as_str().unwrap_or_default();
            let value = calculate(expression)?;
            Ok(json!({"expression": expression, "result": value}))
        }),
    ))
}

/// Evaluates an arithmetic expression: numbers, + - * / % ^, unary minus, parentheses.
pub fn calculate(expression: &str) -> Result<f64, String> {
    let mut parser = Calc {
        chars: expression.chars().filter(|c| !c.is_whitespace()).collect(),
        pos: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    if parser.pos != parser.chars.len() {
        return Err(format!(
            "unexpected `{}` at position {} in `{expression}`",
            parser.chars[parser.pos],
            parser.pos + 1
        ));
    }
    if !value.is_finite() {
        return Err(format!(
            "`{expression}` has no finite result (division by zero?)"
        ));
    }
    Ok(value)
}

struct Calc {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Calc {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.power()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.pos += 1;
            let rhs = self.power()?;
            value = match op {
                '*' => value * rhs,
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.pos += 1;
            // Right-associative: 2^3^2 = 2^(3^2).
            let exponent = self.power()?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('-') => {
                self.pos += 1;
                Ok(-self.unary()?)
            }
            Some('+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.depth += 1;
                if self.depth > 100 {
                    return Err("expression nests parentheses too deeply".into());
                }
                self.pos += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("missing `)`".into());
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_digit() || c == '.') {
                    self.pos += 1;
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                text.parse()
                    .map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.pos + 1)),
            None => Err("the expression ends too early".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calculator_follows_precedence() {
        assert_eq!(calculate("(2+3)*4^2").unwrap(), 80.0);
        assert_eq!(calculate("2^3^2").unwrap(), 512.0);
        assert_eq!(calculate("-3 + 10 % 4").unwrap(), -1.0);
        assert_eq!(calculate("7/2").unwrap(), 3.5);
        assert!(calculate("1/0").unwrap_err().contains("division by zero"));
        assert!(calculate("2+").unwrap_err().contains("ends too early"));
        assert!(calculate("2 $ 3").unwrap_err().contains("`$`"));
        assert!(calculate(&"(".repeat(500)).is_err());
    }
}
