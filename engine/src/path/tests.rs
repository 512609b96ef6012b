//! Tables of cases for the path language, one per feature.

use crate::json;
use crate::json::Value;

use super::*;

fn friends() -> Value {
    json!({
      "name": {"first": "Tom", "last": "Anderson"},
      "age": 37,
      "children": ["Sara", "Alex", "Jack"],
      "fav.movie": "Deer Hunter",
      "friends": [
        {"first": "Dale", "last": "Murphy", "age": 44, "nets": ["ig", "fb", "tw"]},
        {"first": "Roger", "last": "Craig", "age": 68, "nets": ["fb", "tw"]},
        {"first": "Jane", "last": "Murphy", "age": 47, "nets": ["ig", "tw"]}
      ]
    })
}

fn run_get(doc: &Value, cases: &[(&str, Option<Value>)]) {
    for (p, want) in cases {
        let path = Path::parse(p).unwrap_or_else(|e| panic!("parse {p}: {e}"));
        let got = path.get(doc).map(|c| c.into_owned());
        assert_eq!(&got, want, "path {p}");
    }
}

fn run_set(cases: &[(Value, &str, Value, Value)]) {
    for (doc, p, v, want) in cases {
        let mut d = doc.clone();
        Path::parse(p)
            .unwrap_or_else(|e| panic!("parse {p}: {e}"))
            .set(&mut d, v.clone())
            .unwrap_or_else(|e| panic!("set {p}: {e}"));
        assert_eq!(&d, want, "path {p}");
        // Key order is part of the result.
        assert_eq!(d.to_string(), want.to_string(), "order, path {p}");
    }
}

#[test]
fn get_dot_and_escapes() {
    let doc = json!({"a": {"b": {"c": 1}}, "x.y": 5, "s*": 6, "q?": 7, "@at": 8, "h#": 9,
                     "p|q": 10, "k": {"x.y": {"z": 11}}, "": 12, "b\\s": 13});
    run_get(
        &doc,
        &[
            ("a", Some(json!({"b": {"c": 1}}))),
            ("a.b", Some(json!({"c": 1}))),
            ("a.b.c", Some(json!(1))),
            ("a.b.c.d", None),
            ("a.z", None),
            ("nope", None),
            (r"x\.y", Some(json!(5))),
            ("x.y", None),
            (r"s\*", Some(json!(6))),
            (r"q\?", Some(json!(7))),
            (r"\@at", Some(json!(8))),
            (r"h\#", Some(json!(9))),
            ("h#", Some(json!(9))),
            (r"p\|q", Some(json!(10))),
            (r"k.x\.y.z", Some(json!(11))),
            (r"b\\s", Some(json!(13))),
            ("@this", Some(doc.clone())),
            ("", Some(doc.clone())),
        ],
    );
}

#[test]
fn get_wildcards() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("child*.2", Some(json!("Jack"))),
            ("c?ildren.0", Some(json!("Sara"))),
            ("name.*", Some(json!("Tom"))),
            ("n*.last", Some(json!("Anderson"))),
            ("name.l?st", Some(json!("Anderson"))),
            ("name.l??t", Some(json!("Anderson"))),
            ("name.?", None),
            ("*.first", Some(json!("Tom"))),
            ("fav*", Some(json!("Deer Hunter"))),
            ("z*", None),
            ("children.*", None),
            ("*a*e", Some(json!({"first": "Tom", "last": "Anderson"}))),
        ],
    );
    let doc = json!({"a*b": 1, "axb": 2});
    run_get(
        &doc,
        &[
            (r"a\*b", Some(json!(1))),
            ("a*b", Some(json!(1))),
            ("a?b", Some(json!(1))),
            ("ax?", Some(json!(2))),
        ],
    );
}

#[test]
fn get_indexes() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("children.0", Some(json!("Sara"))),
            ("children.2", Some(json!("Jack"))),
            ("children.3", None),
            ("children.-1", None),
            ("children.x", None),
            ("friends.1.first", Some(json!("Roger"))),
            ("friends.0.nets.2", Some(json!("tw"))),
            ("friends.5.first", None),
            ("name.0", None),
        ],
    );
    let doc = json!({"w": {"1": "one"}, "arr": [[1, 2], [3, [4, 5]]]});
    run_get(
        &doc,
        &[
            ("w.1", Some(json!("one"))),
            ("arr.1.1.0", Some(json!(4))),
            ("arr.0", Some(json!([1, 2]))),
        ],
    );
}

#[test]
fn get_count() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("children.#", Some(json!(3))),
            ("friends.#", Some(json!(3))),
            ("friends.1.nets.#", Some(json!(2))),
            ("name.#", None),
            ("age.#", None),
            ("friends|#", Some(json!(3))),
            ("nope.#", None),
        ],
    );
    run_get(&json!([]), &[("#", Some(json!(0)))]);
    run_get(&json!([1, 2]), &[("#", Some(json!(2)))]);
}

#[test]
fn get_count_mapping() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("friends.#.first", Some(json!(["Dale", "Roger", "Jane"]))),
            ("friends.#.age", Some(json!([44, 68, 47]))),
            ("friends.#.nets.0", Some(json!(["ig", "fb", "ig"]))),
            ("friends.#.nets.#", Some(json!([3, 2, 2]))),
            ("friends.#.nope", Some(json!([]))),
            ("children.#.x", Some(json!([]))),
            ("name.#.x", None),
            (
                "friends.#.nets",
                Some(json!([["ig", "fb", "tw"], ["fb", "tw"], ["ig", "tw"]])),
            ),
            // A pipe ends the map: what follows applies to the whole array.
            ("friends.#.first|1", Some(json!("Roger"))),
            ("friends.#.first|#", Some(json!(3))),
            (
                "friends.#.nets|@flatten",
                Some(json!(["ig", "fb", "tw", "fb", "tw", "ig", "tw"])),
            ),
            // Nested maps nest.
            ("friends.#.nets.#.x", Some(json!([[], [], []]))),
        ],
    );
    let doc = json!({"g": [{"m": [{"r": "a"}, {"r": "b"}]}, {"m": [{"r": "c"}]}, {"x": 1}]});
    run_get(
        &doc,
        &[
            ("g.#.m.#.r", Some(json!([["a", "b"], ["c"]]))),
            ("g.#.m.#.r|@flatten", Some(json!(["a", "b", "c"]))),
            ("g.#.m.0.r", Some(json!(["a", "c"]))),
        ],
    );
}

#[test]
fn get_queries_operators() {
    let doc = friends();
    run_get(
        &doc,
        &[
            (r#"friends.#(last=="Murphy").first"#, Some(json!("Dale"))),
            (
                r#"friends.#(last=="Murphy")#.first"#,
                Some(json!(["Dale", "Jane"])),
            ),
            (
                r#"friends.#(last="Murphy")#.first"#,
                Some(json!(["Dale", "Jane"])),
            ),
            (
                r#"friends.#(last!="Murphy")#.first"#,
                Some(json!(["Roger"])),
            ),
            ("friends.#(age>45)#.last", Some(json!(["Craig", "Murphy"]))),
            ("friends.#(age>=47)#.first", Some(json!(["Roger", "Jane"]))),
            ("friends.#(age<47)#.first", Some(json!(["Dale"]))),
            ("friends.#(age<=47)#.first", Some(json!(["Dale", "Jane"]))),
            ("friends.#(age==68).first", Some(json!("Roger"))),
            ("friends.#(age!=44)#.first", Some(json!(["Roger", "Jane"]))),
            (r#"friends.#(first%"D*").last"#, Some(json!("Murphy"))),
            (r#"friends.#(first!%"D*").last"#, Some(json!("Craig"))),
            (r#"friends.#(first%"?o*")#.first"#, Some(json!(["Roger"]))),
            (
                r#"friends.#(first>"J")#.first"#,
                Some(json!(["Roger", "Jane"])),
            ),
            (r#"children.#(!%"*a*")"#, Some(json!("Alex"))),
            (r#"children.#(%"*a*")#"#, Some(json!(["Sara", "Jack"]))),
            (r#"children.#(=="Alex")"#, Some(json!("Alex"))),
            (r#"friends.#(last=="Nobody")"#, None),
            (r#"friends.#(last=="Nobody")#"#, Some(json!([]))),
            (r#"friends.#(last=="Nobody").first"#, None),
            // Different types never match.
            (r#"friends.#(age=="44")"#, None),
            (r#"friends.#(age!="44")#"#, Some(json!([]))),
            (r#"name.#(first=="Tom")"#, None),
        ],
    );
    let doc = json!({"n": [1, 5, 10, 15], "f": [true, false, null], "s": ["apple", "banana"]});
    run_get(
        &doc,
        &[
            ("n.#(>5)", Some(json!(10))),
            ("n.#(>5)#", Some(json!([10, 15]))),
            ("n.#(>=5)#", Some(json!([5, 10, 15]))),
            ("n.#(<5)#", Some(json!([1]))),
            ("n.#(==10)", Some(json!(10))),
            ("n.#(==10.0)", Some(json!(10))),
            ("n.#(!=1)#", Some(json!([5, 10, 15]))),
            ("n.#(>100)", None),
            ("f.#(==true)#", Some(json!([true]))),
            ("f.#(==false)", Some(json!(false))),
            ("f.#(==null)#", Some(json!([null]))),
            (r#"s.#(<"b")"#, Some(json!("apple"))),
            ("s.#(==banana)", Some(json!("banana"))),
            (r#"s.#(%"*an*")#"#, Some(json!(["banana"]))),
            (r#"s.#(%"a\*")"#, None),
        ],
    );
}

#[test]
fn get_queries_existence_tilde_nested() {
    let doc = friends();
    run_get(
        &doc,
        &[
            (
                r#"friends.#(nets.#(=="fb"))#.first"#,
                Some(json!(["Dale", "Roger"])),
            ),
            (r#"friends.#(nets.#(=="fb")).first"#, Some(json!("Dale"))),
            (r#"friends.#(nets.#(=="zz"))#"#, Some(json!([]))),
            (
                "friends.#(first)#.first",
                Some(json!(["Dale", "Roger", "Jane"])),
            ),
            ("friends.#(nope)", None),
            ("friends.#()#.age", Some(json!([44, 68, 47]))),
            // `.` after `#(...)#` maps; `|` applies to the array.
            (r#"friends.#(last=="Murphy")#|first"#, None),
            (r#"friends.#(last=="Murphy")#.0"#, Some(json!([]))),
            (r#"friends.#(last=="Murphy")#|0.first"#, Some(json!("Dale"))),
            (r#"friends.#(last=="Murphy")#.#"#, Some(json!([]))),
            (r#"friends.#(last=="Murphy")#|#"#, Some(json!(2))),
            (
                r#"friends.#(age>40)#.nets.#(=="ig")"#,
                Some(json!(["ig", "ig"])),
            ),
        ],
    );
    let doc = json!({"vals": [
        {"a": 1, "b": true}, {"a": 2, "b": true}, {"a": 3, "b": false}, {"a": 4, "b": "0"},
        {"a": 5, "b": 0}, {"a": 6, "b": "1"}, {"a": 7, "b": 1}, {"a": 8, "b": "true"},
        {"a": 9, "b": false}, {"a": 10, "b": null}, {"a": 11}
    ]});
    run_get(
        &doc,
        &[
            ("vals.#(b==~true)#.a", Some(json!([1, 2, 6, 7, 8]))),
            ("vals.#(b==~false)#.a", Some(json!([3, 4, 5, 9, 10, 11]))),
            ("vals.#(b!=~true)#.a", Some(json!([3, 4, 5, 9, 10, 11]))),
            ("vals.#(b==~null)#.a", Some(json!([10, 11]))),
            (
                "vals.#(b==~*)#.a",
                Some(json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])),
            ),
            ("vals.#(b)#.a", Some(json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))),
        ],
    );
}

#[test]
fn get_multipaths_and_literals() {
    let doc = friends();
    run_get(
        &doc,
        &[
            (
                r#"{name.first,age,"the_murphys":friends.#(last=="Murphy")#.first}"#,
                Some(json!({"first": "Tom", "age": 37, "the_murphys": ["Dale", "Jane"]})),
            ),
            (
                "[name.first,age,children.1]",
                Some(json!(["Tom", 37, "Alex"])),
            ),
            ("[name.first,nope,age]", Some(json!(["Tom", 37]))),
            ("{name.first,nope}", Some(json!({"first": "Tom"}))),
            (
                "{a:age,b:name.last}",
                Some(json!({"a": 37, "b": "Anderson"})),
            ),
            ("{friends.#}", Some(json!({"_": 3}))),
            (
                "[age,[name.first,name.last]]",
                Some(json!([37, ["Tom", "Anderson"]])),
            ),
            ("[name.first,age]|1", Some(json!(37))),
            ("{name.first,age}.age", Some(json!(37))),
            (
                "friends.#.[first,age]",
                Some(json!([["Dale", 44], ["Roger", 68], ["Jane", 47]])),
            ),
            (
                "name.{last,first}",
                Some(json!({"last": "Anderson", "first": "Tom"})),
            ),
            (
                r#"{name.first,"company":!"Happysoft","employed":!true}"#,
                Some(json!({"first": "Tom", "company": "Happysoft", "employed": true})),
            ),
            ("!true", Some(json!(true))),
            (r#"!"str""#, Some(json!("str"))),
            (r#"!{"a":[1,2]}"#, Some(json!({"a": [1, 2]}))),
            (r#"!{"a":[1,2]}.a.1"#, Some(json!(2))),
            ("[!1.5,!null,!-2]", Some(json!([1.5, null, -2]))),
            ("[]", Some(json!([]))),
            ("{}", Some(json!({}))),
        ],
    );
}

/// `multi_values` reads what `get` reads as the elements of its array, for exactly the
/// paths that are one array multipath and nothing else.
#[test]
fn multi_values_are_the_elements_get_builds() {
    let doc = friends();
    let cases = [
        ("[name.first,age,children.1]", true),
        ("[name.first,nope,age]", true),
        ("[nope,none]", true),
        ("[age,[name.first,name.last]]", true),
        ("[!1.5,!null,!-2]", true),
        ("[age,!1000000000]", true),
        ("[friends.#.first,friends.#(last==\"Murphy\")#.age]", true),
        ("[]", true),
        ("[name.first,age]|1", false),
        ("[name.first,age]|@pretty", false),
        ("{name.first,age}", false),
        ("friends.#.[first,age]", false),
        ("children", false),
        ("age", false),
        ("", false),
    ];
    for (p, multi) in cases {
        let path = Path::parse(p).unwrap_or_else(|e| panic!("parse {p}: {e}"));
        assert_eq!(path.is_array_multi(), multi, "path {p}");
        let read: Option<Vec<Value>> = path
            .multi_values(&doc)
            .map(|vs| vs.map(|v| v.into_owned()).collect());
        if !multi {
            assert_eq!(read, None, "path {p}");
            continue;
        }
        let Some(Value::Array(built)) = path.get(&doc).map(|v| v.into_owned()) else {
            panic!("path {p}: get gives no array");
        };
        assert_eq!(read, Some(built.iter().cloned().collect()), "path {p}");
    }
}

#[test]
fn get_modifiers() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("children.@reverse", Some(json!(["Jack", "Alex", "Sara"]))),
            ("children|@reverse", Some(json!(["Jack", "Alex", "Sara"]))),
            ("children.@reverse.0", Some(json!("Jack"))),
            ("children|@reverse|0", Some(json!("Jack"))),
            (
                "name.@reverse",
                Some(json!({"last": "Anderson", "first": "Tom"})),
            ),
            ("age.@reverse", Some(json!(37))),
            ("name.@keys", Some(json!(["first", "last"]))),
            ("name.@values", Some(json!(["Tom", "Anderson"]))),
            ("children.@values", Some(json!(["Sara", "Alex", "Jack"]))),
            ("age.@keys", Some(json!([]))),
            (
                "name.@this",
                Some(json!({"first": "Tom", "last": "Anderson"})),
            ),
            ("@this.age", Some(json!(37))),
            ("name|@this|last", Some(json!("Anderson"))),
            (
                "name.@ugly",
                Some(json!({"first": "Tom", "last": "Anderson"})),
            ),
            (
                "name.@pretty",
                Some(json!(
                    "{\n  \"first\": \"Tom\",\n  \"last\": \"Anderson\"\n}\n"
                )),
            ),
            ("name.@pretty.first", Some(json!("Tom"))),
            ("age.@pretty", Some(json!(37))),
            ("name.@valid.first", Some(json!("Tom"))),
            (
                "friends.#.first|@reverse",
                Some(json!(["Jane", "Roger", "Dale"])),
            ),
            (
                "name.@tostr",
                Some(json!(r#"{"first":"Tom","last":"Anderson"}"#)),
            ),
            ("age.@tostr", Some(json!("37"))),
            ("children.0.@tostr", Some(json!(r#""Sara""#))),
            ("name.@dig:first", Some(json!(["Tom"]))),
            ("@dig:first", Some(json!(["Tom", "Dale", "Roger", "Jane"]))),
            ("@dig:nope", Some(json!([]))),
        ],
    );
    // A final @pretty reads as GJSON's pretty text, keys sorted when asked.
    let got = Path::parse(r#"@pretty:{"sortKeys":true}"#)
        .unwrap()
        .get(&json!({"b": 1, "a": {"d": 2, "c": 3}}))
        .unwrap()
        .into_owned();
    assert_eq!(
        got,
        json!("{\n  \"a\": {\n    \"c\": 3,\n    \"d\": 2\n  },\n  \"b\": 1\n}\n")
    );

    let doc = json!({
        "arr": [1, [2], [3, 4], [5, [6, 7]]],
        "objs": [{"first": "Tom", "age": 37}, {"age": 41}, 5],
        "enc": "{\"inner\":{\"v\":9}}",
        "bad": "not json",
        "grp": {"id": ["123", "456", "789"], "val": [2, 1], "x": 5},
        "dup": [1, "1", 1, {"a": 1}, {"a": 1}, [1], [1], null, null],
    });
    run_get(
        &doc,
        &[
            ("arr.@flatten", Some(json!([1, 2, 3, 4, 5, [6, 7]]))),
            (
                r#"arr.@flatten:{"deep":true}"#,
                Some(json!([1, 2, 3, 4, 5, 6, 7])),
            ),
            ("enc.@flatten", Some(json!("{\"inner\":{\"v\":9}}"))),
            ("objs.@join", Some(json!({"first": "Tom", "age": 41}))),
            (
                r#"objs.@join:{"preserve":true}"#,
                Some(json!({"first": "Tom", "age": 41})),
            ),
            ("objs.@join.age", Some(json!(41))),
            ("enc.@join", None),
            ("enc.@fromstr", Some(json!({"inner": {"v": 9}}))),
            ("enc|@fromstr|inner.v", Some(json!(9))),
            ("bad.@fromstr", None),
            ("arr.@fromstr", Some(json!([1, [2], [3, 4], [5, [6, 7]]]))),
            (
                "grp.@group",
                Some(json!([{"id": "123", "val": 2}, {"id": "456", "val": 1}, {"id": "789"}])),
            ),
            ("arr.@group", None),
            ("dup.@dedupe", Some(json!([1, "1", {"a": 1}, [1], null]))),
            ("enc.@dedupe", Some(json!("{\"inner\":{\"v\":9}}"))),
            (
                "arr.@reverse.@flatten",
                Some(json!([5, [6, 7], 3, 4, 2, 1])),
            ),
        ],
    );
}

#[test]
fn get_pipes() {
    let doc = friends();
    run_get(
        &doc,
        &[
            ("friends.0.first", Some(json!("Dale"))),
            ("friends|0.first", Some(json!("Dale"))),
            ("friends.0|first", Some(json!("Dale"))),
            ("friends|0|first", Some(json!("Dale"))),
            ("children|1", Some(json!("Alex"))),
            ("children|#", Some(json!(3))),
            ("name|nope", None),
            ("friends.#(age>45)#|0.first", Some(json!("Roger"))),
        ],
    );
}

#[test]
fn get_borrows_plain_paths() {
    let doc = friends();
    for p in ["name.first", "friends.1.nets.0", "children.2", "@this"] {
        let got = Path::parse(p).unwrap().get(&doc).unwrap();
        assert!(matches!(got, Cow::Borrowed(_)), "path {p}");
    }
    let got = Path::parse("friends.#(age==68).first")
        .unwrap()
        .get(&doc)
        .unwrap();
    assert!(matches!(got, Cow::Borrowed(_)));
    assert_eq!(got.as_ref(), &json!("Roger"));
}

#[test]
fn parse_errors() {
    for (p, needle) in [
        ("a.#(b==1", "unclosed"),
        ("[a,b", "unclosed"),
        ("{a:b", "unclosed"),
        (r"a\", "lone"),
        ("a.!", "literal"),
        ("a.!{bad", "literal"),
        (r#"a.#(b%1)"#, "pattern"),
        ("a.#(b>~true)", "'~'"),
        ("@dig", "@dig"),
        (r#"@flatten:{"deep":"#, "argument"),
    ] {
        match Path::parse(p) {
            Err(PathError::Invalid { path, reason }) => {
                assert_eq!(path, p);
                assert!(reason.contains(needle), "path {p}: reason {reason:?}");
            }
            other => panic!("path {p}: expected an error, got {other:?}"),
        }
    }
}

#[test]
fn set_create_and_overwrite() {
    run_set(&[
        (json!({}), "a", json!(1), json!({"a": 1})),
        (json!({}), "a.b", json!(1), json!({"a": {"b": 1}})),
        (
            json!({}),
            "a.b.c",
            json!(true),
            json!({"a": {"b": {"c": true}}}),
        ),
        (json!({"a": 1}), "a", json!(2), json!({"a": 2})),
        (
            json!({"a": 1, "b": 2, "c": 3}),
            "b",
            json!("two"),
            json!({"a": 1, "b": "two", "c": 3}),
        ),
        (
            json!({"z": 1, "a": 2}),
            "m",
            json!(1),
            json!({"z": 1, "a": 2, "m": 1}),
        ),
        (
            json!({"a": {"x": 1}}),
            "a.y",
            json!(2),
            json!({"a": {"x": 1, "y": 2}}),
        ),
        (json!({"a": 1}), "a", json!(null), json!({"a": null})),
        (
            json!({"a": 1}),
            "a",
            json!({"n": [1, {"x": null}]}),
            json!({"a": {"n": [1, {"x": null}]}}),
        ),
        (json!({"a": null}), "a.b", json!(1), json!({"a": {"b": 1}})),
        (json!({}), "é.ü", json!(1), json!({"é": {"ü": 1}})),
        (json!({"a": 1}), "@this", json!([1]), json!([1])),
        (json!({"a": 1}), "", json!(2), json!(2)),
    ]);
}

#[test]
fn set_indexes_pad_append() {
    run_set(&[
        (json!({"a": [1, 2]}), "a.0", json!(9), json!({"a": [9, 2]})),
        (json!({"a": [1, 2]}), "a.1", json!(9), json!({"a": [1, 9]})),
        (
            json!({"a": [1, 2]}),
            "a.2",
            json!(9),
            json!({"a": [1, 2, 9]}),
        ),
        (
            json!({"a": [1, 2]}),
            "a.4",
            json!(9),
            json!({"a": [1, 2, null, null, 9]}),
        ),
        (
            json!({"a": [1, 2]}),
            "a.-1",
            json!(9),
            json!({"a": [1, 2, 9]}),
        ),
        (
            json!({"a": [1, 2]}),
            "a.-1.x",
            json!(9),
            json!({"a": [1, 2, {"x": 9}]}),
        ),
        (
            json!({"a": [{"b": 1}, {"b": 2}]}),
            "a.1.b",
            json!(3),
            json!({"a": [{"b": 1}, {"b": 3}]}),
        ),
        (
            json!({"a": [{"b": 1}]}),
            "a.0.c",
            json!(3),
            json!({"a": [{"b": 1, "c": 3}]}),
        ),
        (
            json!({"a": [{"b": 1}]}),
            "a.2.c",
            json!(3),
            json!({"a": [{"b": 1}, null, {"c": 3}]}),
        ),
        (
            json!({"a": 1}),
            "b.0",
            json!("x"),
            json!({"a": 1, "b": ["x"]}),
        ),
        (
            json!({"a": 1}),
            "b.2",
            json!("x"),
            json!({"a": 1, "b": [null, null, "x"]}),
        ),
        (
            json!({"a": 1}),
            "b.-1",
            json!("x"),
            json!({"a": 1, "b": ["x"]}),
        ),
        (
            json!({"a": 1}),
            "b.-1.c",
            json!(1),
            json!({"a": 1, "b": [{"c": 1}]}),
        ),
        (
            json!({"a": 1}),
            "b.1.c.0",
            json!(1),
            json!({"a": 1, "b": [null, {"c": [1]}]}),
        ),
        (json!([]), "0", json!(1), json!([1])),
        (json!([]), "-1", json!(1), json!([1])),
        (json!([1]), "3", json!(2), json!([1, null, null, 2])),
        (json!([[1], [2]]), "1.-1", json!(3), json!([[1], [2, 3]])),
        (
            json!({"a": [1]}),
            "a.-1",
            json!({"t": "x"}),
            json!({"a": [1, {"t": "x"}]}),
        ),
    ]);
}

#[test]
fn set_object_keys_and_escapes() {
    run_set(&[
        (json!({"a": {}}), "a.0", json!(9), json!({"a": {"0": 9}})),
        (
            json!({"a": {"0": 1}}),
            "a.0",
            json!(9),
            json!({"a": {"0": 9}}),
        ),
        (json!({"a": {}}), "a.-1", json!(9), json!({"a": {"-1": 9}})),
        (json!({"a": {}}), "a.:0", json!(9), json!({"a": {"0": 9}})),
        (json!({}), "a.:0", json!(9), json!({"a": {"0": 9}})),
        (json!({}), "a.:-1", json!(9), json!({"a": {"-1": 9}})),
        (
            json!({}),
            "users.:2313.name",
            json!("Sara"),
            json!({"users": {"2313": {"name": "Sara"}}}),
        ),
        (json!({"a": 1}), ":a", json!(2), json!({"a": 2})),
        (
            json!({"a": {}}),
            r"a.b\.c",
            json!(9),
            json!({"a": {"b.c": 9}}),
        ),
        (
            json!({"a": {}}),
            r"a.b\\.c",
            json!(9),
            json!({"a": {"b\\": {"c": 9}}}),
        ),
        (json!({}), r"\*", json!(1), json!({"*": 1})),
        (json!({}), r"\#", json!(1), json!({"#": 1})),
        (json!({}), r"a.\@x", json!(1), json!({"a": {"@x": 1}})),
        (json!({}), r"\:a", json!(1), json!({":a": 1})),
        (json!({}), r"x\|y", json!(1), json!({"x|y": 1})),
        (json!({}), r"\1", json!(1), json!({"1": 1})),
    ]);
}

#[test]
fn set_errors() {
    let invalid = [
        "a.*",
        "a?.b",
        "a.#",
        "a.#(b==1)",
        "a.#(b==1)#",
        "a|b",
        "a.@reverse",
        "[a,b]",
        "{a,b}",
        "a.!true",
    ];
    for p in invalid {
        let path = Path::parse(p).unwrap_or_else(|e| panic!("parse {p}: {e}"));
        let mut d = json!({"a": [{"b": 1}]});
        match path.set(&mut d, json!(1)) {
            Err(PathError::Invalid { path, .. }) => assert_eq!(path, p),
            other => panic!("set {p}: expected Invalid, got {other:?}"),
        }
        match path.delete(&mut d) {
            Err(PathError::Invalid { .. }) => {}
            other => panic!("delete {p}: expected Invalid, got {other:?}"),
        }
        assert_eq!(d, json!({"a": [{"b": 1}]}), "unchanged after {p}");
    }
    // SJSON replaces a scalar on the way to the key.
    let replaced: &[(Value, &str, Value)] = &[
        (json!({"a": "str"}), "a.b", json!({"a": {"b": 1}})),
        (json!({"a": "str"}), "a.0", json!({"a": [1]})),
        (
            json!({"a": {"b": 5}}),
            "a.b.c",
            json!({"a": {"b": {"c": 1}}}),
        ),
        (json!({"a": true}), "a.-1", json!({"a": [1]})),
    ];
    for (doc, p, want) in replaced {
        let mut d = doc.clone();
        Path::parse(p).unwrap().set(&mut d, json!(1)).unwrap();
        assert_eq!(&d, want, "set {p} on {doc}");
    }
    let cannot: &[(Value, &str)] = &[
        (json!({"a": [1, 2]}), "a.x"),
        // Found by the `path` fuzz target: this would pad with 100 million nulls.
        (json!({}), "a.100000000"),
        (json!({"a": [1]}), "a.65538"),
        (json!({"a": [1, 2]}), "a.:0"),
        (json!("str"), "a"),
        (json!(5), "a.b"),
    ];
    for (doc, p) in cannot {
        let mut d = doc.clone();
        match Path::parse(p).unwrap().set(&mut d, json!(1)) {
            Err(PathError::CannotSet { path, reason }) => {
                assert_eq!(&path, p);
                assert!(!reason.is_empty());
            }
            other => panic!("set {p}: expected CannotSet, got {other:?}"),
        }
        assert_eq!(&d, doc, "unchanged after {p}");
    }
}

#[test]
fn delete_table() {
    let cases: &[(Value, &str, bool, Value)] = &[
        (json!({"a": 1, "b": 2}), "a", true, json!({"b": 2})),
        (
            json!({"a": 1, "b": 2, "c": 3}),
            "b",
            true,
            json!({"a": 1, "c": 3}),
        ),
        (json!({"a": 1, "b": 2}), "c", false, json!({"a": 1, "b": 2})),
        (json!({"a": null, "b": 1}), "a", true, json!({"b": 1})),
        (
            json!({"a": {"b": 1, "c": 2}}),
            "a.b",
            true,
            json!({"a": {"c": 2}}),
        ),
        (json!({"a": [1, 2, 3]}), "a.0", true, json!({"a": [2, 3]})),
        (json!({"a": [1, 2, 3]}), "a.1", true, json!({"a": [1, 3]})),
        (json!({"a": [1, 2, 3]}), "a.2", true, json!({"a": [1, 2]})),
        (
            json!({"a": [1, 2, 3]}),
            "a.3",
            false,
            json!({"a": [1, 2, 3]}),
        ),
        (json!({"a": [1, 2, 3]}), "a.-1", true, json!({"a": [1, 2]})),
        (json!({"a": []}), "a.-1", false, json!({"a": []})),
        (
            json!({"a": {"-1": 1, "b": 2}}),
            "a.-1",
            true,
            json!({"a": {"b": 2}}),
        ),
        (
            json!({"a": {"0": 1, "b": 2}}),
            "a.0",
            true,
            json!({"a": {"b": 2}}),
        ),
        (
            json!({"a": [{"b": 1, "c": 2}]}),
            "a.0.b",
            true,
            json!({"a": [{"c": 2}]}),
        ),
        (
            json!({"a": [{"b": 1, "c": 2}]}),
            "a.-1.c",
            true,
            json!({"a": [{"b": 1}]}),
        ),
        (
            json!({"a": [{"b": 1, "c": 2}]}),
            "a.0.x",
            false,
            json!({"a": [{"b": 1, "c": 2}]}),
        ),
        (
            json!({"a": [{"b": 1}]}),
            "a.1.b",
            false,
            json!({"a": [{"b": 1}]}),
        ),
        (
            json!({"a": [{"b": 1}]}),
            "a.x",
            false,
            json!({"a": [{"b": 1}]}),
        ),
        (json!({"a": "str"}), "a.b", false, json!({"a": "str"})),
        (json!({"a": {"b.c": 1}}), r"a.b\.c", true, json!({"a": {}})),
        (json!({"a": {"1": 1}}), "a.:1", true, json!({"a": {}})),
        (json!([1, 2, 3]), "1", true, json!([1, 3])),
        (json!([1, 2, 3]), "-1", true, json!([1, 2])),
        (json!({"a": 1}), "nope.deeper", false, json!({"a": 1})),
        (json!({"a": 1}), "@this", true, json!(null)),
    ];
    for (doc, p, found, want) in cases {
        let mut d = doc.clone();
        let got = Path::parse(p).unwrap().delete(&mut d).unwrap();
        assert_eq!(got, *found, "path {p}");
        assert_eq!(&d, want, "path {p}");
        assert_eq!(d.to_string(), want.to_string(), "order, path {p}");
    }
}

#[test]
fn set_then_get_roundtrip() {
    let mut d = json!({});
    for (p, v) in [
        ("a.b", json!(1)),
        ("a.c.-1", json!("x")),
        ("a.c.-1", json!("y")),
        (r"k\.j", json!(2)),
    ] {
        Path::parse(p).unwrap().set(&mut d, v).unwrap();
    }
    assert_eq!(d, json!({"a": {"b": 1, "c": ["x", "y"]}, "k.j": 2}));
    run_get(
        &d,
        &[
            ("a.c.1", Some(json!("y"))),
            ("a.c.#", Some(json!(2))),
            (r"k\.j", Some(json!(2))),
        ],
    );
}

#[test]
fn at_keys_that_are_not_modifiers_are_keys() {
    let doc = json!({"@timestamp": "t", "a": {"@version": 1}});
    let cases: &[(&str, Option<Value>)] = &[
        ("@timestamp", Some(json!("t"))),
        ("\\@timestamp", Some(json!("t"))),
        ("a.@version", Some(json!(1))),
        ("@missing", None),
        ("a|@keys", Some(json!(["@version"]))),
    ];
    for (p, want) in cases {
        let got = Path::parse(p).unwrap().get(&doc).map(|c| c.into_owned());
        assert_eq!(&got, want, "path {p}");
    }
    let mut d = json!({});
    Path::parse("@timestamp")
        .unwrap()
        .set(&mut d, json!(1))
        .unwrap();
    Path::parse("x.@v").unwrap().set(&mut d, json!(2)).unwrap();
    assert_eq!(d, json!({"@timestamp": 1, "x": {"@v": 2}}));
    assert!(
        Path::parse("@reverse")
            .unwrap()
            .set(&mut d, json!(1))
            .is_err()
    );
}
