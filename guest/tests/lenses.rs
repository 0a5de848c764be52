//! lenses: a Rust program with a `main` and a `#[test]`, for the code
//! lenses of `rewind lsp` (tests/tests/lsp.rs builds it with -g, as a
//! program and as a test harness, in a workspace). Prints `2 + 3 = 5`.

fn add(a: u64, b: u64) -> u64 {
    a + b
}

fn main() {
    println!("2 + 3 = {}", add(2, 3));
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds_up() {
        assert_eq!(super::add(2, 3), 5);
    }
}
