//! The documentation stays true: every integration test a page in `docs/` names as proof
//! (`` `<module>::<test>` ``, with `<module>` a file of this binary) exists.

use std::path::Path;

#[test]
fn every_test_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = 0;
    for page in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let page = page.unwrap().path();
        let text = std::fs::read_to_string(&page).unwrap();
        for reference in text.split('`').skip(1).step_by(2) {
            let Some((module, test)) = reference.split_once("::") else { continue };
            let file = root.join("tests/integration").join(format!("{module}.rs"));
            if test.contains("::") || !file.exists() {
                continue;
            }
            let source = std::fs::read_to_string(&file).unwrap();
            assert!(
                source.contains(&format!("fn {test}(")),
                "{} names {reference}, which is not a test in {}",
                page.display(),
                file.display()
            );
            named += 1;
        }
    }
    assert!(named >= 5, "the security page names its tests ({named} found)");
}
