//! `completions SHELL` and `man [COMMAND]`: generated from the clap definitions the parser
//! itself uses, so they list exactly the commands and flags `rpr` takes.

use clap::{Args, CommandFactory};

use crate::{Cli, Exit, Failure, Usage};

/// `completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    shell: clap_complete::Shell,
}

/// `man [COMMAND]`.
#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// A command, for its own page (`rpr man call`); without one, the page of `rpr`.
    #[arg(value_name = "COMMAND")]
    command: Option<String>,
}

/// Writes `bytes` to stdout; a closed stdout ends the process as `outln!` does (141).
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        other => Ok(other?),
    }
}

/// Prints the completion script for the shell.
pub(crate) fn completions(args: &CompletionsArgs) -> Result<Exit, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "rpr", &mut script);
    write_stdout(&script)?;
    Ok(Exit::Done)
}

/// Prints the man page (roff) of `rpr` or of one of its commands.
pub(crate) fn man(args: &ManArgs) -> Result<Exit, Failure> {
    let rpr = Cli::command();
    let page = match &args.command {
        None => rpr,
        Some(name) => {
            let Some(sub) = rpr.find_subcommand(name) else {
                let names: Vec<&str> = rpr.get_subcommands().map(clap::Command::get_name).collect();
                return Err(Usage(format!(
                    "{name:?} is no command of rpr; the commands: {}",
                    names.join(", ")
                ))
                .into());
            };
            // The page's name is the one `man` looks up: `rpr-call`.
            sub.clone().name(format!("rpr-{name}"))
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff)?;
    write_stdout(&roff)?;
    Ok(Exit::Done)
}
