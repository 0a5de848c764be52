//! A derivation as its `.drv` file in the store writes it (the ATerm
//! `Derive([outputs],[input derivations],[input sources],system,builder,
//! [args],[env])`), read without asking Nix, whose JSON form changed names
//! between versions.

use std::collections::BTreeMap;

/// Why a `.drv` file could not be read, or its build cannot be a run.
#[derive(Debug, thiserror::Error)]
pub enum DrvError {
    #[error("not a derivation: {0}")]
    Syntax(String),
    #[error("{0} is a fixed-output derivation: its build fetches from the network, and Rewind builds nothing that needs it")]
    FixedOutput(String),
    #[error("{0} is an impure derivation (__impure): Rewind builds only what its inputs decide")]
    Impure(String),
    #[error("{0} has content-addressed outputs (their paths are known only after the build), which Rewind does not build yet")]
    Floating(String),
    #[error("{0} uses __structuredAttrs, which Rewind does not build yet")]
    Structured(String),
    #[error("{0} passes attributes as files (passAsFile), which Rewind does not build yet")]
    PassAsFile(String),
}

/// One output: its name and store path, and for a fixed-output
/// derivation the hash it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub name: String,
    pub path: String,
    pub hash_algo: String,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derivation {
    pub outputs: Vec<Output>,
    /// Input derivations and the outputs of each the build uses.
    pub input_drvs: Vec<(String, Vec<String>)>,
    pub input_srcs: Vec<String>,
    pub system: String,
    pub builder: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl Derivation {
    pub fn parse(text: &str) -> Result<Derivation, DrvError> {
        let mut p = Parser {
            s: text.as_bytes(),
            at: 0,
        };
        p.word("Derive(")?;
        let outputs = p.list(|p| {
            p.word("(")?;
            let name = p.string()?;
            p.word(",")?;
            let path = p.string()?;
            p.word(",")?;
            let hash_algo = p.string()?;
            p.word(",")?;
            let hash = p.string()?;
            p.word(")")?;
            Ok(Output {
                name,
                path,
                hash_algo,
                hash,
            })
        })?;
        p.word(",")?;
        let input_drvs = p.list(|p| {
            p.word("(")?;
            let drv = p.string()?;
            p.word(",")?;
            let outs = p.list(Parser::string)?;
            p.word(")")?;
            Ok((drv, outs))
        })?;
        p.word(",")?;
        let input_srcs = p.list(Parser::string)?;
        p.word(",")?;
        let system = p.string()?;
        p.word(",")?;
        let builder = p.string()?;
        p.word(",")?;
        let args = p.list(Parser::string)?;
        p.word(",")?;
        let env = p.list(|p| {
            p.word("(")?;
            let k = p.string()?;
            p.word(",")?;
            let v = p.string()?;
            p.word(")")?;
            Ok((k, v))
        })?;
        p.word(")")?;
        if p.at != p.s.len() {
            return Err(p.error("text after the derivation"));
        }
        Ok(Derivation {
            outputs,
            input_drvs,
            input_srcs,
            system,
            builder,
            args,
            env: env.into_iter().collect(),
        })
    }

    /// Its name (`name` in its environment).
    pub fn name(&self) -> &str {
        self.env.get("name").map_or("", String::as_str)
    }

    /// Whether its build is one Rewind can run: every input named, the
    /// outputs' paths known, nothing fetched. `shown` names it in the error.
    pub fn check_buildable(&self, shown: &str) -> Result<(), DrvError> {
        let is = |k: &str| self.env.get(k).is_some_and(|v| v == "1");
        if is("__impure") {
            return Err(DrvError::Impure(shown.into()));
        }
        if self.outputs.iter().any(|o| !o.hash.is_empty()) {
            return Err(DrvError::FixedOutput(shown.into()));
        }
        if self.outputs.iter().any(|o| o.path.is_empty()) {
            return Err(DrvError::Floating(shown.into()));
        }
        if is("__structuredAttrs") || self.env.contains_key("__json") {
            return Err(DrvError::Structured(shown.into()));
        }
        if self
            .env
            .get("passAsFile")
            .is_some_and(|v| !v.trim().is_empty())
        {
            return Err(DrvError::PassAsFile(shown.into()));
        }
        Ok(())
    }

    /// The environment Nix gives its builder: the derivation's own, over
    /// Nix's defaults, with the build directory `top`.
    pub fn build_env(&self, top: &str, cores: u32) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = [
            ("PATH", "/path-not-set"),
            ("HOME", "/homeless-shelter"),
            ("NIX_STORE", "/nix/store"),
            ("NIX_LOG_FD", "2"),
            ("TERM", "xterm-256color"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        env.insert("NIX_BUILD_CORES".into(), cores.to_string());
        env.extend(self.env.clone());
        for k in ["NIX_BUILD_TOP", "TMPDIR", "TEMPDIR", "TMP", "TEMP", "PWD"] {
            env.insert(k.into(), top.into());
        }
        env
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> DrvError {
        DrvError::Syntax(format!("{what} at byte {}", self.at))
    }

    fn word(&mut self, w: &str) -> Result<(), DrvError> {
        if self.s[self.at..].starts_with(w.as_bytes()) {
            self.at += w.len();
            Ok(())
        } else {
            Err(self.error(&format!("expected `{w}`")))
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, DrvError>,
    ) -> Result<Vec<T>, DrvError> {
        self.word("[")?;
        let mut out = Vec::new();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(out);
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn string(&mut self) -> Result<String, DrvError> {
        self.word("\"")?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(self.error("an unfinished string")),
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => {
                    let c = *self
                        .s
                        .get(self.at + 1)
                        .ok_or_else(|| self.error("an unfinished string"))?;
                    out.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        c => c,
                    });
                    self.at += 2;
                }
                Some(c) => {
                    out.push(c);
                    self.at += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| self.error("a string that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRV: &str = r#"Derive([("doc","/nix/store/43mk-hello-doc","",""),("out","/nix/store/ajsp-hello","","")],[("/nix/store/aaaa-dep.drv",["out"])],["/nix/store/ap5l-busybox"],"x86_64-linux","/nix/store/ap5l-busybox/bin/sh",["-c","echo \"hi\"\n"],[("builder","/nix/store/ap5l-busybox/bin/sh"),("name","hello"),("out","/nix/store/ajsp-hello"),("system","x86_64-linux")])"#;

    #[test]
    fn reads_a_drv() {
        let d = Derivation::parse(DRV).unwrap();
        assert_eq!(d.name(), "hello");
        assert_eq!(d.outputs.len(), 2);
        assert_eq!(d.outputs[1].path, "/nix/store/ajsp-hello");
        assert_eq!(
            d.input_drvs,
            vec![("/nix/store/aaaa-dep.drv".into(), vec!["out".into()])]
        );
        assert_eq!(d.args, vec!["-c", "echo \"hi\"\n"]);
        d.check_buildable("x").unwrap();
        let env = d.build_env("/build", 4);
        assert_eq!(env["NIX_BUILD_CORES"], "4");
        assert_eq!(env["TMPDIR"], "/build");
        assert_eq!(env["HOME"], "/homeless-shelter");
        assert_eq!(env["out"], "/nix/store/ajsp-hello");
    }

    #[test]
    fn refuses_what_it_cannot_build_and_broken_text() {
        let fixed = DRV.replacen(
            r#"("out","/nix/store/ajsp-hello","","")"#,
            r#"("out","/nix/store/ajsp-hello","sha256","abc")"#,
            1,
        );
        let d = Derivation::parse(&fixed).unwrap();
        assert!(matches!(
            d.check_buildable("x"),
            Err(DrvError::FixedOutput(_))
        ));
        let impure = DRV.replacen(
            r#"("name","hello")"#,
            r#"("__impure","1"),("name","hello")"#,
            1,
        );
        let d = Derivation::parse(&impure).unwrap();
        assert!(matches!(d.check_buildable("x"), Err(DrvError::Impure(_))));
        for bad in [
            "",
            "Derive(",
            &DRV[..DRV.len() - 1],
            &format!("{DRV}x"),
            r#"Derive([("a\"] "#,
        ] {
            assert!(Derivation::parse(bad).is_err(), "{bad:?}");
        }
    }
}
