//! `rewind gc`: removes pages, images and root files no run uses, and leftovers of
//! interrupted commands.

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct GcArgs {
    /// Print what was freed as one JSON object: freed_bytes, pages_removed,
    /// page_bytes, pages_kept, images_removed, image_bytes, files_removed,
    /// file_bytes, leftovers_removed, leftover_bytes, damaged_packs (page
    /// packs kept because their header cannot be read).
    #[arg(long)]
    pub json: bool,
}

/// Bytes, briefly: `512 bytes`, `3.2 KiB`, `1.5 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64;
    let mut unit = "";
    for u in UNITS {
        v /= 1024.0;
        unit = u;
        if v < 1024.0 {
            break;
        }
    }
    format!("{v:.1} {unit}")
}

pub fn main(args: GcArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let lock = store.lock_exclusive(&mut || {
        eprintln!("rewind: waiting for the runs being recorded in this store to finish...")
    })?;
    let r = store.gc(&lock)?;
    if !r.damaged_packs.is_empty() {
        let names: Vec<String> = r
            .damaged_packs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        eprintln!(
            "rewind: warning: kept {} page pack{} whose header is damaged (the pages in it cannot be \
             read, nor told used or not): {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        );
    }
    if args.json {
        let mut v = serde_json::to_value(&r)?;
        v["freed_bytes"] = r.freed().into();
        println!("{v}");
    } else {
        let mut parts = vec![format!(
            "{} page{} ({} kept)",
            r.pages_removed,
            if r.pages_removed == 1 { "" } else { "s" },
            r.pages_kept
        )];
        if r.images_removed > 0 {
            parts.push(format!(
                "{} image{}",
                r.images_removed,
                if r.images_removed == 1 { "" } else { "s" }
            ));
        }
        if r.files_removed > 0 {
            parts.push(format!(
                "{} root file{} no run's view names",
                r.files_removed,
                if r.files_removed == 1 { "" } else { "s" }
            ));
        }
        if r.leftovers_removed > 0 {
            parts.push(format!(
                "{} leftover{} of interrupted commands",
                r.leftovers_removed,
                if r.leftovers_removed == 1 { "" } else { "s" }
            ));
        }
        println!(
            "freed {} ({} bytes): removed {}",
            bytes(r.freed()),
            r.freed(),
            parts.join(", ")
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::bytes(10), "10 bytes");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(3 << 20), "3.0 MiB");
    }
}
