//! Wiring: the command line, logs, configuration, the run, the exit code.
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::ExitCode;
use std::str::FromStr;

use ecr_refresh::cli::{self, Command};
use ecr_refresh::config::{Config, Mode};
use ecr_refresh::logging::LogFormat;
use ecr_refresh::report::exit;
use ecr_refresh::termination::{error_message, write_termination_message_now};
use ecr_refresh::{check, logging, refresh, run, uninstall};

fn main() -> ExitCode {
    // Before anything else is read: --help and --version touch neither AWS nor the cluster.
    let command = match cli::parse(std::env::args_os().skip(1)) {
        Ok(command @ (Command::Run | Command::Check | Command::Uninstall)) => command,
        Ok(Command::Help) => {
            print!("{}", cli::help());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("{}", cli::version());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ecr-refresh: {e}");
            return ExitCode::from(exit::CONFIG);
        }
    };
    // The format is needed before the configuration is parsed, so its errors are logged in it.
    let format = std::env::var("ECR_REFRESH_LOG_FORMAT")
        .ok()
        .and_then(|v| LogFormat::from_str(v.trim()).ok())
        .unwrap_or(LogFormat::Text);
    logging::init(format);

    // Only a refresh signs with the Roles Anywhere files: it reads them before anything is sent.
    let config = Config::from_env()
        .map(|config| match command {
            Command::Check => Config {
                mode: Mode::Check,
                ..config
            },
            _ => config,
        })
        .and_then(|config| {
            if command == Command::Run && config.mode == Mode::Refresh {
                config.identity()?;
            }
            Ok(config)
        });
    let config = match config {
        Ok(config) => config,
        Err(e) => {
            tracing::error!(error = %e, "invalid configuration: nothing was sent");
            // The configuration is what failed, so its path is read as given, or defaulted.
            let path = std::env::var_os("ECR_REFRESH_TERMINATION_LOG").filter(|p| !p.is_empty());
            write_termination_message_now(
                path.as_deref().map(Path::new),
                &error_message(exit::CONFIG, &e.to_string()),
            );
            return ExitCode::from(exit::CONFIG);
        }
    };
    // kube and aws-config each bring rustls; name the one provider both use.
    if rustls::crypto::aws_lc_rs::default_provider()
        .install_default()
        .is_err()
    {
        tracing::debug!("a rustls crypto provider was already installed");
    }
    // One thread: the run waits on the network, not the CPU, and a CronJob's pod gets little
    // CPU. At 10,000 namespaces it spends about a quarter less CPU than a thread per core.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "could not start the async runtime");
            return ExitCode::from(exit::UNAVAILABLE);
        }
    };
    if command == Command::Uninstall {
        return ExitCode::from(runtime.block_on(uninstall::run(&config)));
    }
    let shutdown = run::stop::shutdown_signal(config.timeout);
    ExitCode::from(match config.mode {
        Mode::Refresh => runtime.block_on(refresh::run(&config, shutdown)),
        Mode::Check => runtime.block_on(check::run(&config, shutdown)),
    })
}
