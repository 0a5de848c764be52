//! `rewind gdb`: a fork of a run at a step, served to the system's gdb with
//! the program's symbols, its separate debug info and its sources as
//! `rewind where` finds them (`files`); reverse execution replays the
//! recording.

use anyhow::{Context, Result};
use clap::Args;
use gdbstub::conn::ConnectionExt;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use vmm::debug::{DebugCore, DebugError, Origin};
use vmm::store::Run;

mod files;
mod hostio;
mod stub;
mod tls;

#[derive(Args, Debug)]
pub struct GdbArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step after which the session starts.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The process to debug (default: the one on the CPU at STEP).
    #[arg(long, value_name = "P")]
    pub pid: Option<u32>,
    /// The thread gdb starts in (default: the one on the CPU at STEP).
    #[arg(long, value_name = "T")]
    pub tid: Option<u32>,
    /// The frame gdb selects first (0 is the innermost).
    #[arg(long, value_name = "N")]
    pub frame: Option<u32>,
    /// Listen here and print the gdb command line that connects, instead
    /// of starting gdb. A loopback address unless --listen-any.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Allow a --listen address other hosts reach. The gdb protocol has no
    /// authentication: whoever connects first debugs the run and reads its
    /// memory.
    #[arg(long, requires = "listen")]
    pub listen_any: bool,
    /// Passed to gdb (after `--`).
    #[arg(last = true, value_name = "GDB_ARGS")]
    pub gdb_args: Vec<String>,
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// Where the server waits for gdb.
enum Listener {
    /// `--listen`: whoever connects first (the gdb protocol has no
    /// authentication), so loopback unless `--listen-any`.
    Tcp(TcpListener),
    /// The gdb this process starts: a socket of mode 0600 in a directory
    /// of mode 0700, serving only this user, so that no other local user
    /// can take the session (and read the run's memory) before gdb does.
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// What follows `target remote` in gdb.
    fn target(&self) -> Result<String> {
        Ok(match self {
            Listener::Tcp(l) => l.local_addr()?.to_string(),
            Listener::Unix(_, path) => path.display().to_string(),
        })
    }

    /// The first connection of this user (any, over TCP).
    fn accept(&self) -> Result<Box<dyn ConnectionExt<Error = std::io::Error>>> {
        match self {
            Listener::Tcp(l) => {
                let (stream, _) = l.accept().context("waiting for gdb")?;
                stream.set_nodelay(true)?;
                Ok(Box::new(stream))
            }
            Listener::Unix(l, path) => loop {
                let (stream, _) = l.accept().context("waiting for gdb")?;
                match crate::private_socket::same_user(&stream) {
                    Ok(()) => return Ok(Box::new(stream)),
                    Err(uid) => eprintln!(
                        "rewind: gdb: closed a connection to {} from user id {uid}, not this user's",
                        path.display()
                    ),
                }
            },
        }
    }
}

/// Binds the gdb server's address: loopback, unless `--listen-any`, with a
/// warning then.
fn bind(args: &GdbArgs) -> Result<TcpListener> {
    let addr = args.listen.as_deref().unwrap_or("127.0.0.1:0");
    let addrs: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .with_context(|| format!("--listen {addr}"))?
        .collect();
    let loopback = !addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && !args.listen_any {
        crate::util::usage!(
            "--listen {addr} is not a loopback address: the gdb protocol has no authentication, \
             so say --listen-any to serve other hosts"
        );
    }
    if !loopback {
        eprintln!(
            "rewind: warning: serving gdb on {addr}, which other hosts reach; whoever connects first debugs the run"
        );
    }
    TcpListener::bind(&addrs[..]).with_context(|| format!("cannot listen on {addr}"))
}

pub fn main(args: GdbArgs) -> Result<i32> {
    let tcp = args.listen.as_ref().map(|_| bind(&args)).transpose()?;
    let run = crate::app::inside::run_at(&args.run.spec, args.step)?;
    let (mut session, first) = open(&args, &run)?;
    // Only this user may enter it: it holds the program and gdb's socket.
    let dir = tempfile::Builder::new()
        .prefix("rewind-gdb-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .context("a temporary directory for the program")?;
    let (prog, files) = write_program(&mut session, &run, dir.path())?;
    let listener = match tcp {
        Some(l) => Listener::Tcp(l),
        None => {
            let path = dir.path().join("gdb.sock");
            Listener::Unix(crate::private_socket::bind(&path)?, path)
        }
    };
    let addr = listener.target()?;
    let gdb_words = gdb_command(&args, files, &prog, &addr);
    let child = if args.listen.is_some() {
        let line: Vec<String> = gdb_words.iter().map(|w| shell_word(w)).collect();
        println!("{}", line.join(" "));
        eprintln!(
            "rewind: serving run {} at step {} on {addr}; the program's file is kept until gdb disconnects",
            run.id, args.step
        );
        None
    } else {
        Some(start_gdb(&gdb_words)?)
    };
    serve(session, first, listener.accept()?)?;
    match child {
        Some(mut c) => {
            let st = c.wait()?;
            Ok(st.code().unwrap_or(1))
        }
        None => Ok(0),
    }
}

/// The debug session at the step and process asked for, and the thread
/// gdb starts with.
fn open(args: &GdbArgs, run: &Run) -> Result<(DebugCore, u32)> {
    let store = crate::app::store()?;
    let origin =
        Origin::of_run(run, &store).with_context(|| format!("cannot debug run {}", run.id))?;
    let session = match DebugCore::open(origin, args.step, args.pid) {
        Ok(s) => s,
        Err(DebugError::Ended(at)) => return Err(crate::app::inside::ended(run, args.step, at)),
        Err(e) => return Err(e.into()),
    };
    let first = match args.tid {
        Some(t) if session.threads().contains(&t) => t,
        Some(t) => crate::util::usage!(
            "no thread {t} in process {} at step {} of run {}",
            session.pid(),
            args.step,
            run.id
        ),
        None => session.current_thread(),
    };
    Ok((session, first))
}

/// Writes the process's program file (the run's, or the one its execve
/// loaded), from the run's image, into `dir` for gdb's symbols; with the
/// debug info and sources found for it. Its path, and gdb's words that
/// name those files.
fn write_program(
    session: &mut DebugCore,
    run: &Run,
    dir: &std::path::Path,
) -> Result<(PathBuf, Vec<String>)> {
    let pid = session.pid();
    let (path, bytes) = match session.kernel().program_of(pid) {
        Some(p) => p,
        None => (run.manifest.program.clone(), session.program()?),
    };
    let name = std::path::Path::new(&path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let prog = dir.join(name);
    std::fs::write(&prog, bytes).with_context(|| format!("cannot write {}", prog.display()))?;
    let (files, notes) = files::prepare(session.kernel(), pid, dir)?;
    for n in notes {
        eprintln!("rewind: {n}; gdb names those frames by symbol");
    }
    Ok((prog, files))
}

/// gdb's command line: the files, the program, `target remote`, the frame
/// asked for and the user's own gdb arguments.
fn gdb_command(
    args: &GdbArgs,
    files: Vec<String>,
    prog: &std::path::Path,
    addr: &str,
) -> Vec<String> {
    let mut gdb_words: Vec<String> = vec!["gdb".into(), "-q".into()];
    gdb_words.extend(files);
    gdb_words.extend([
        prog.to_string_lossy().into_owned(),
        "-ex".into(),
        format!("target remote {addr}"),
    ]);
    if let Some(n) = args.frame {
        gdb_words.extend(["-ex".into(), format!("frame {n}")]);
    }
    gdb_words.extend(args.gdb_args.iter().cloned());
    gdb_words
}

/// Starts gdb, which owns Ctrl-C from then on.
fn start_gdb(gdb_words: &[String]) -> Result<std::process::Child> {
    let mut cmd = Command::new(&gdb_words[0]);
    cmd.args(&gdb_words[1..]);
    // SAFETY: signal() is async-signal-safe; gdb gets the default
    // disposition whatever this process does with SIGINT below.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = cmd.spawn().context("cannot start gdb (is it installed?)")?;
    // Ctrl-C at the terminal goes to gdb and to this process alike: it
    // is gdb's (it interrupts the target by the protocol); this server
    // goes on until gdb detaches, and its temporary files go with it.
    // SAFETY: sets one signal's disposition.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
    }
    Ok(child)
}

/// Serves one gdb connection until it detaches or the process ends.
fn serve(
    session: DebugCore,
    first: u32,
    stream: Box<dyn ConnectionExt<Error = std::io::Error>>,
) -> Result<()> {
    let mut stub = stub::Stub::new(session, first);
    let conn: Box<dyn ConnectionExt<Error = std::io::Error>> =
        Box::new(tls::TlsConn::new(stream, stub.tls.clone()));
    let gdb = gdbstub::stub::GdbStub::new(conn);
    match gdb.run_blocking::<stub::EventLoop>(&mut stub) {
        Ok(_) => Ok(()),
        Err(e) if e.is_connection_error() => Ok(()),
        Err(e) => Err(anyhow::anyhow!("gdb stub: {e}")),
    }
}
