//! Rust values for the debugger to show: `inspect` holds a Vec, a String,
//! a &str, Options, an enum with data and a Box when it marks the moment
//! (a write of "mark\n"; a native test builds it with `--cfg native_mark`,
//! an int3 instead).

use std::io::Write;

#[derive(Debug)]
#[allow(dead_code)]
enum Shape {
    Circle { r: f64 },
    Rect(u32, u32),
    Empty,
}

#[derive(Debug)]
#[allow(dead_code)]
struct Account {
    id: u64,
    owner: String,
    balance: i64,
    parent: Option<Box<Account>>,
}

#[inline(never)]
fn mark() {
    #[cfg(native_mark)]
    unsafe {
        std::arch::asm!("int3")
    };
    #[cfg(not(native_mark))]
    std::io::stdout().write_all(b"mark\n").unwrap();
}

#[inline(never)]
fn inspect(numbers: &Vec<i32>, owner: &String, name: &str, some: Option<i32>, account: Box<Account>) -> i64 {
    let none: Option<i32> = None;
    let shape = Shape::Rect(3, 4);
    let circle = Shape::Circle { r: 1.5 };
    let empty = Shape::Empty;
    let words: Vec<String> = vec!["one".to_string(), "two".to_string()];
    let count = numbers.len();
    mark();
    std::hint::black_box((&none, &shape, &circle, &empty, &words, count, name, owner));
    account.balance + some.unwrap_or(0) as i64 + numbers[0] as i64
}

fn main() {
    let numbers = vec![10, 20, 30];
    let owner = String::from("ada");
    let parent = Account { id: 1, owner: "root".into(), balance: -5, parent: None };
    let account = Box::new(Account { id: 2, owner: owner.clone(), balance: 100, parent: Some(Box::new(parent)) });
    let t = std::thread::spawn(move || inspect(&numbers, &owner, "hi", Some(42), account));
    let total = t.join().unwrap();
    std::process::exit(if total == 152 { 0 } else { 1 });
}
