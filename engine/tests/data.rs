//! Pack data tables: loaded and checked with their places, queried by scripts, and counters
//! shared by every session of a pack, counted when a turn commits and never when it is undone.

use crate::support;

use std::sync::Arc;

use ruleweave::store::{self, Store};
use ruleweave::{Engine, ErrorKind};
use serde_json::json;
use support::write_root;

const PACK: &str = r#"
data:
  cards:
    file: cards.yaml
    columns:
      id: string
      word: string
      level: int
      rare: {type: bool, default: false}
    counters: [times_used]
state:
  picked: {type: list, reducer: append}
input:
  level: {type: int, required: true}
  fail: {type: bool, default: false}
output: [picked]
graph:
  nodes:
    pick: {script: pick.rhai::pick}
  edges:
    - START -> pick
    - pick -> END
"#;

const CARDS: &str = r#"- {id: a, word: apple, level: 1}
- {id: b, word: banana, level: 1}
- {id: c, word: cherry, level: 2, rare: true}
- {id: d, word: date, level: 2}
- {id: e, word: elderberry, level: 3, rare: true}
"#;

const PICK: &str = r#"
fn pick() {
    let rows = query("cards", #{
        where: #{ level: #{ between: [input().level, input().level] }, rare: false },
        order: ["times_used", "id"],
        limit: 1,
    });
    let card = rows[0];
    count("cards", card.id);
    if input().fail { throw "this turn fails after counting"; }
    #{ picked: `${card.word}:${card.times_used}` }
}
"#;

/// A pack root with the deck pack under `name` (counters belong to a pack's name, and a
/// PostgreSQL test database outlives a run, so each run there takes a new name).
fn root(name: &str) -> tempfile::TempDir {
    let pick = format!("scripts/{name}/pick.rhai");
    write_root(&[(&format!("config/{name}.yaml"), PACK), (&format!("data/{name}/cards.yaml"), CARDS), (&pick, PICK)])
}

async fn shared_counters(store: Arc<dyn Store>, name: &str) {
    let root = root(name);
    let engine = Engine::builder(root.path()).store(store).build();
    let mut a = engine.open(name, &Default::default()).await.unwrap();
    let mut b = engine.open(name, &Default::default()).await.unwrap();
    // Least used first, then by id: a, b, then a again (both used once), across sessions.
    let out = a.turn(json!({"level": 1})).await.unwrap().output;
    assert_eq!(out["picked"], json!(["apple:0"]));
    let out = b.turn(json!({"level": 1})).await.unwrap().output;
    assert_eq!(out["picked"], json!(["banana:0"]), "session b sees the count session a committed");
    // A turn that counts and then fails counts nothing.
    let e = b.turn(json!({"level": 1, "fail": true})).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Script);
    let out = a.turn(json!({"level": 1})).await.unwrap().output;
    assert_eq!(out["picked"], json!(["apple:0", "apple:1"]), "the failed turn's count was undone");
    // Rare cards are filtered out: level 2 has only `date`.
    let out = b.turn(json!({"level": 2})).await.unwrap().output;
    assert_eq!(out["picked"], json!(["banana:0", "date:0"]));
}

#[tokio::test]
async fn counters_are_shared_and_undone_in_memory() {
    shared_counters(Arc::new(store::MemoryStore::new()), "deck").await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn counters_are_shared_and_undone_in_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::open(&format!("sqlite://{}", dir.path().join("d.db").display())).await.unwrap();
    shared_counters(store, "deck").await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_are_shared_and_undone_in_postgres() {
    let Some(url) = support::postgres() else { return };
    let run = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    shared_counters(store::open(&url).await.unwrap(), &format!("deck_{run}")).await;
}

#[test]
fn bad_rows_are_reported_at_their_place() {
    let root = write_root(&[
        ("config/deck.yaml", PACK),
        (
            "data/deck/cards.yaml",
            "- {id: a, word: apple, level: 1}\n- {id: b, word: banana, level: high}\n- {id: a, word: again, level: 2}\n- {id: c, word: cherry, colour: red, level: 1}\n- {id: d, level: 1}\n",
        ),
        ("scripts/deck/pick.rhai", PICK),
    ]);
    let e = Engine::builder(root.path()).build().packs().get("deck").unwrap_err();
    let found: Vec<String> = e.all().map(|e| format!("{}: {}", e.origin().unwrap(), e.detail())).collect();
    assert_eq!(
        found,
        [
            "data/deck/cards.yaml:2:32: the row's `level` should be an int and is a string",
            "data/deck/cards.yaml:4:33: `colour` is not a column of this table",
            "data/deck/cards.yaml:5:3: the row has no `word`",
            "data/deck/cards.yaml:3:3: table `cards`: a second row has id `a`",
        ]
    );
}

/// A YAML table past the size YAML tables may have is refused in plain words that say where
/// its limit is and what to do (CSV), not with the parser's budget; the same rows as CSV load.
#[test]
fn a_table_too_large_for_yaml_says_so_and_csv_takes_it() {
    // Each row here is 7 values: the map, and a key and a value for each of its 3 cells.
    let rows = ruleweave::YAML_TABLE_NODES / 7 + 1000;
    let yaml: String = (0..rows).map(|i| format!("- {{id: c{i}, word: w{i}, level: {i}}}\n")).collect();
    let root =
        write_root(&[("config/deck.yaml", PACK), ("data/deck/cards.yaml", &yaml), ("scripts/deck/pick.rhai", PICK)]);
    let e = Engine::builder(root.path()).build().packs().get("deck").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "this table is too large for YAML: a YAML table holds at most {} values (about {} rows of its 4 \
             columns); write it as CSV, which has no such limit (in data/deck/cards.yaml)",
            ruleweave::YAML_TABLE_NODES,
            ruleweave::YAML_TABLE_NODES / 9
        )
    );
    let csv: String =
        std::iter::once("id,word,level\n".to_owned()).chain((0..rows).map(|i| format!("c{i},w{i},{i}\n"))).collect();
    std::fs::remove_file(root.path().join("data/deck/cards.yaml")).unwrap();
    std::fs::write(root.path().join("data/deck/cards.csv"), csv).unwrap();
    std::fs::write(root.path().join("config/deck.yaml"), PACK.replace("cards.yaml", "cards.csv")).unwrap();
    let pack = Engine::builder(root.path()).build().packs().get("deck").unwrap();
    assert_eq!(pack.describe()["tables"]["cards"]["rows"], rows);
}

/// A table with a problem in every row tells of the first twenty and how many more there are.
#[test]
fn a_table_tells_of_its_first_problems_and_counts_the_rest() {
    let yaml: String = (0..500).map(|i| format!("- {{id: c{i}, word: w{i}, level: high}}\n")).collect();
    let root =
        write_root(&[("config/deck.yaml", PACK), ("data/deck/cards.yaml", &yaml), ("scripts/deck/pick.rhai", PICK)]);
    let e = Engine::builder(root.path()).build().packs().get("deck").unwrap_err();
    let all: Vec<String> = e.all().map(|e| e.detail().to_owned()).collect();
    assert_eq!(all.len(), 21, "{all:?}");
    assert_eq!(all[20], "table `cards`: 480 more problems like these in its rows");
}

#[test]
fn a_table_may_be_csv() {
    let root = write_root(&[
        ("config/deck.yaml", &PACK.replace("cards.yaml", "cards.csv")),
        ("data/deck/cards.csv", "id,word,level,rare\na,apple,1,\nb,banana,one,false\n"),
        ("scripts/deck/pick.rhai", PICK),
    ]);
    let e = Engine::builder(root.path()).build().packs().get("deck").unwrap_err();
    assert_eq!(e.to_string(), "the row's `level` is an int, and `one` is not one (in data/deck/cards.csv:3)");
    std::fs::write(root.path().join("data/deck/cards.csv"), "id,word,level,rare\na,apple,1,\nb,banana,2,true\n")
        .unwrap();
    let pack = Engine::builder(root.path()).build().packs().get("deck").unwrap();
    assert_eq!(pack.describe()["tables"]["cards"]["rows"], 2);
}

/// Rows of a table without counters are the scripts' to measure and change: each query hands out
/// copies (changing one changes nothing in the table).
#[tokio::test]
async fn rows_without_counters_are_copies_a_script_may_measure_and_change() {
    const PICK_ALL: &str = r#"
fn pick() {
    let rows = query("cards", #{ where: #{ level: #{ between: [1, input().level] } }, order: ["id"] });
    rows[0].word = "changed";
    rows.push(#{ word: "extra" });
    let again = query("cards", #{ order: ["id"], limit: 1 });
    #{ picked: `${rows.len()} rows, first ${rows[0].word}, then ${again[0].word} (${again.len()})` }
}
"#;
    let root = write_root(&[
        ("config/deck.yaml", &PACK.replace("    counters: [times_used]\n", "")),
        ("data/deck/cards.yaml", CARDS),
        ("scripts/deck/pick.rhai", PICK_ALL),
    ]);
    let engine = Engine::builder(root.path()).build();
    let mut s = engine.open("deck", &Default::default()).await.unwrap();
    let out = s.turn(json!({"level": 2})).await.unwrap().output;
    assert_eq!(out["picked"], json!(["5 rows, first changed, then apple (1)"]));
}
