//! A scenario's own suites (`[[suite]]`): data suites written inline or in a file beside the
//! scenario (`file = "suite.toml"`), read through the one suite-data parser (`mcp::data`), and
//! the lookup of a suite by name, built-in or the scenario's, as the checks and the plan need it.

use std::sync::Arc;

use toml::Spanned;

use super::{Scenario, ScenarioError};
use crate::mcp::data::{parse_file, RawSuite, SuiteData};
use crate::mcp::suite::{AnySuite, Suite};

impl Scenario {
    /// Reads the scenario's `suite` key: a built-in suite's name, or `[[suite]]` tables; returns
    /// the scenario's default suite (the name, or the first table's).
    pub(super) fn read_suites(&mut self, raw: &Spanned<toml::Value>) -> Result<String, ScenarioError> {
        let span = raw.span();
        let tables = match raw.get_ref() {
            toml::Value::String(name) => return Ok(name.clone()),
            toml::Value::Array(items) => items,
            _ => {
                return Err(self.error_at(
                    span,
                    "`suite` is a built-in suite's name, or [[suite]] tables (a data suite, or `file = \"suite.toml\"`)",
                ))
            }
        };
        let dir = self.path.parent().map(std::path::PathBuf::from).unwrap_or_default();
        let mut first = None;
        for (i, item) in tables.iter().enumerate() {
            let at = |m: String| format!("[[suite]] #{}: {m}", i + 1);
            let toml::Value::Table(t) = item else {
                return Err(self.error_at(span.clone(), at("a suite is a table".into())));
            };
            let data: SuiteData = match t.get("file") {
                Some(toml::Value::String(file)) if t.len() == 1 => {
                    let path = dir.join(file);
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        self.error_at(
                            span.clone(),
                            at(format!("cannot read the suite file {}: {e}", path.display())),
                        )
                    })?;
                    let data = parse_file(&path, &text).map_err(|e| ScenarioError::Whole {
                        path: self.path.clone(),
                        message: at(format!("in its file: {e}")),
                    })?;
                    // The suite file and the files it read (named relative to it), for the run
                    // folder: only those that stay inside the scenario's folder as written.
                    let base = std::path::Path::new(file)
                        .parent()
                        .map(std::path::Path::to_path_buf)
                        .unwrap_or_default();
                    self.suite_files.push((file.clone(), text.clone()));
                    for name in data.files.keys() {
                        let rel = base.join(name).to_string_lossy().into_owned();
                        if let Ok(t) = std::fs::read_to_string(dir.join(&rel)) {
                            self.suite_files.push((rel, t));
                        }
                    }
                    if Suite::builtin(&data.name).is_some() {
                        return Err(self.error_at(
                            span.clone(),
                            at(format!("{:?} is a built-in suite's name: give this one another", data.name)),
                        ));
                    }
                    data
                }
                Some(_) => {
                    return Err(self.error_at(
                        span.clone(),
                        at("`file` names a suite file beside the scenario, and stands alone in its table"
                            .into()),
                    ))
                }
                None => {
                    // Written out and read again: the suite's own keys keep their places in that
                    // text (a `toml::Value` has none), and an error is placed at the [[suite]].
                    let text = toml::to_string(t).expect("a TOML table serializes");
                    let raw: RawSuite = toml::from_str(&text)
                        .map_err(|e| self.error_at(span.clone(), at(e.message().to_string())))?;
                    raw.check_in(span.clone(), &dir).map_err(|(_, m)| self.error_at(span.clone(), at(m)))?
                }
            };
            if self.suites.contains_key(&data.name) {
                return Err(
                    self.error_at(span.clone(), at(format!("suite {:?} is defined twice", data.name)))
                );
            }
            first.get_or_insert_with(|| data.name.clone());
            self.suites.insert(data.name.clone(), Arc::new(data));
        }
        first.ok_or_else(|| {
            self.error_at(span, "`suite` is an empty list: define a [[suite]] or name a built-in one")
        })
    }

    /// A suite by name: a built-in one, or the scenario's own.
    pub fn suite_named(&self, name: &str) -> Option<AnySuite> {
        match Suite::from_name(name) {
            Some(s) => Some(AnySuite::Builtin(s)),
            None => self.suites.get(name).map(|d| AnySuite::Data(d.clone())),
        }
    }

    /// Every suite name a server may take, for error messages.
    pub fn suite_names(&self) -> Vec<String> {
        Suite::ALL.iter().map(|x| x.name().to_string()).chain(self.suites.keys().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use std::path::Path;

    const SERVER: &str =
        "[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n";
    const LOAD: &str =
        "[[workload]]\nkind = \"concurrency\"\ntool = \"twice\"\nworkers = 1\nduration = \"1s\"\n";

    fn parse(dir: &Path, text: &str) -> Result<Scenario, String> {
        let path = dir.join("s.toml");
        std::fs::write(&path, text).unwrap();
        Scenario::load(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn a_scenario_names_its_own_suites_inline_or_by_file_and_its_workloads_are_checked_against_them() {
        let dir = tempfile::tempdir().unwrap();
        let inline = format!(
            "name = \"s\"\n[[suite]]\nname = \"mine\"\n[[suite.tool]]\nname = \"twice\"\nargs = {{ n = 2 }}\ncheck = {{ path = \"/n\", equals = 4 }}\n{SERVER}{LOAD}"
        );
        let s = parse(dir.path(), &inline).unwrap();
        assert_eq!(s.suite, "mine");
        assert_eq!(s.suite_named("mine").unwrap().tools(), ["twice"]);
        assert!(s.suite_named("weekly").is_some(), "built-in suites stay known");

        std::fs::write(
            dir.path().join("mine.toml"),
            "name = \"filed\"\n[[tool]]\nname = \"twice\"\nargs = { n = 2 }\n",
        )
        .unwrap();
        let s = parse(dir.path(), &format!("name = \"s\"\n[[suite]]\nfile = \"mine.toml\"\n{SERVER}{LOAD}"))
            .unwrap();
        assert_eq!(s.suite, "filed");
        assert_eq!(
            s.suite_files.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["mine.toml"],
            "kept for the run folder"
        );

        // A workload's tool the suite lacks is refused at the tool.
        let e = parse(dir.path(), &inline.replace("tool = \"twice\"\nworkers", "tool = \"thrice\"\nworkers"))
            .unwrap_err();
        assert!(e.contains("s.toml:14:8") && e.contains("has no tool \"thrice\""), "{e}");
        // An error in a suite file is placed in that file.
        std::fs::write(
            dir.path().join("mine.toml"),
            "name = \"filed\"\n[[tool]]\nname = \"twice\"\ncheck = \"maybe\"\n",
        )
        .unwrap();
        let e = parse(dir.path(), &format!("name = \"s\"\n[[suite]]\nfile = \"mine.toml\"\n{SERVER}{LOAD}"))
            .unwrap_err();
        assert!(e.contains("mine.toml:4:9") && e.contains("\"maybe\""), "{e}");
        // A missing file, and a built-in name, are refused at the [[suite]].
        let e = parse(dir.path(), &format!("name = \"s\"\n[[suite]]\nfile = \"none.toml\"\n{SERVER}{LOAD}"))
            .unwrap_err();
        assert!(e.contains("s.toml:2:") && e.contains("cannot read the suite file"), "{e}");
    }
}
