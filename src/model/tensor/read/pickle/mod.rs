//! A pickle reader that runs no pickle code: a stack machine over the opcodes of protocols 0-5
//! that torch.save emits, producing a tree of plain [`Value`]s.
//!
//! Globals (`GLOBAL`, `STACK_GLOBAL`) resolve only through an allow-list of torch's
//! tensor-rebuild functions, storage classes, dtypes and a few containers ([`Global`]); any
//! other global (`posix.system`, `builtins.eval`, ...) is refused the moment it is named.
//! `REDUCE`, `NEWOBJ` and `BUILD` never call anything: they interpret allowed globals.
//!
//! Objects live in an arena ([`Pickle::objects`]) and refer to each other by [`ObjId`], so a
//! memo `GET` costs nothing and containers filled after memoization (`EMPTY_LIST`, `BINPUT`,
//! `APPENDS`) are seen filled everywhere, exactly as in Python. The graph may share nodes or
//! hold cycles; walkers must bound their depth and visits.
//!
//! Every length is checked against the bytes left before use; stack, memo, mark depth and
//! object count are capped, and values derived by copying (e.g. `set(list)` on a memoized
//! list) are charged against a budget proportional to the input, so no input makes the reader
//! allocate much more than its own size, recurse, panic or read out of bounds.
//!
//! Files: `value` (the object graph), `opcodes` (opcode names and argument decoding),
//! `machine` (the stack machine), `globals` (the allow-list) and `rebuild` (what applying
//! an allowed global builds).

mod globals;
mod machine;
mod opcodes;
mod rebuild;
mod value;

pub use globals::{Global, resolve_global};
pub use machine::unpickle;
pub use value::{Element, ObjId, Pickle, Storage, Tensor, Value};

/// Deepest nesting of `MARK`s (open tuples, lists, dicts being built).
pub const MAX_MARK_DEPTH: usize = 1000;
/// Most values the stack holds at once.
pub const MAX_STACK: usize = 1 << 20;
/// Most objects one pickle creates.
pub const MAX_OBJECTS: usize = 1 << 23;
/// Most dimensions of a rebuilt tensor.
pub const MAX_RANK: usize = 64;

/// At most 120 characters of `text`, for messages about hostile input.
pub(crate) fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(120).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use super::*;
    use crate::model::tensor::read::DType;

    fn no_storage(key: &str) -> Result<Range<usize>, String> {
        Err(format!("no storage {key}"))
    }

    fn run(data: &[u8]) -> Result<Pickle, String> {
        unpickle(data, &mut no_storage)
    }

    #[test]
    fn malicious_globals_are_refused_by_name() {
        let cases: [(&[u8], &str); 4] = [
            (b"cposix\nsystem\n(S'touch /tmp/pwned'\ntR.", "posix.system"),
            (b"cbuiltins\neval\n.", "builtins.eval"),
            (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "os.system"),
            (b"csubprocess\nPopen\n.", "subprocess.Popen"),
        ];
        for (data, name) in cases {
            let err = run(data).unwrap_err();
            assert!(
                err.contains(&format!("refused pickle global `{name}`")),
                "{err}"
            );
            assert!(err.contains("_rebuild_tensor_v2"), "{err}");
        }
    }

    #[test]
    fn containers_memo_and_scalars() {
        // {'a': [1, 2**40, -3], 'b': 'x', 'c': (1.5, True, None)} plus a memo GET of the list.
        let data = b"\x80\x02}q\x00(X\x01\x00\x00\x00a]q\x01(K\x01\x8a\x06\x00\x00\x00\x00\
            \x00\x01J\xfd\xff\xff\xffeX\x01\x00\x00\x00bX\x01\x00\x00\x00xX\x01\x00\x00\x00c\
            G?\xf8\x00\x00\x00\x00\x00\x00\x88N\x87X\x01\x00\x00\x00dh\x01u.";
        let p = run(data).unwrap();
        let Value::Dict(pairs) = p.get(p.root) else {
            panic!()
        };
        assert_eq!(pairs.len(), 4);
        let Value::List(list) = p.get(pairs[0].1) else {
            panic!()
        };
        let values: Vec<_> = list.iter().map(|&i| p.get(i).clone()).collect();
        assert_eq!(
            values,
            vec![Value::Int(1), Value::Int(1 << 40), Value::Int(-3)]
        );
        // The memo GET sees the list filled after it was memoized.
        assert_eq!(pairs[3].1, pairs[0].1);
        let Value::Tuple(t) = p.get(pairs[2].1) else {
            panic!()
        };
        assert_eq!(p.get(t[0]), &Value::Float(1.5));
        assert_eq!(p.get(t[1]), &Value::Bool(true));
    }

    #[test]
    fn protocol_zero_text_forms() {
        let data = b"(lp0\nI42\naL-7L\naF2.5\naS'a\\'b\\n'\naVx\\u00e9\naI01\na.";
        let p = run(data).unwrap();
        let Value::List(items) = p.get(p.root) else {
            panic!()
        };
        let values: Vec<_> = items.iter().map(|&i| p.get(i).clone()).collect();
        assert_eq!(
            values,
            vec![
                Value::Int(42),
                Value::Int(-7),
                Value::Float(2.5),
                Value::Str("a'b\n".into()),
                Value::Str("x\u{e9}".into()),
                Value::Bool(true),
            ]
        );
    }

    #[test]
    fn tensor_rebuild_through_persistent_id() {
        let data = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage\
            ctorch\nHalfStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x06tQK\x01K\x02K\x02\
            \x86K\x01K\x02\x86\x89ccollections\nOrderedDict\n)RtR.";
        let mut seen = Vec::new();
        let p = unpickle(data, &mut |key: &str| {
            seen.push(key.to_owned());
            Ok(100..112)
        })
        .unwrap();
        assert_eq!(seen, ["0"]);
        let Value::Tensor(t) = p.get(p.root) else {
            panic!("{:?}", p.get(p.root))
        };
        assert_eq!(t.dtype, Ok(DType::Float16));
        assert_eq!((t.storage.clone(), t.storage_offset), (100..112, 1));
        assert_eq!(
            (t.shape.as_slice(), t.strides.as_slice()),
            (&[2, 2][..], &[1, 2][..])
        );
    }

    #[test]
    fn hostile_shapes_never_panic() {
        // Deep MARK nesting, memo misses, truncation, huge claimed lengths, odd dicts.
        let deep: Vec<u8> = std::iter::repeat_n(b'(', 100_000).collect();
        assert!(run(&deep).unwrap_err().contains("deeper than 1000"));
        assert!(
            run(b"h\x05.")
                .unwrap_err()
                .contains("memo GET of missing index 5")
        );
        assert!(run(b"X\xff\xff\xff\x7fab").unwrap_err().contains("claims"));
        assert!(
            run(b"\x8d\xff\xff\xff\xff\xff\xff\xff\xff")
                .unwrap_err()
                .contains("claims")
        );
        assert!(run(b"(K\x01d.").unwrap_err().contains("odd number"));
        assert!(
            run(b"K\x01K\x02R.")
                .unwrap_err()
                .contains("REDUCE on a int")
        );
        assert!(run(b"(.").unwrap_err().contains("underflow"));
        assert!(run(b"").unwrap_err().contains("truncated"));
        // A list nested 100k levels deep by APPEND: built fine, walkers bound their depth.
        let mut nested = b"]".repeat(100_000);
        nested.extend(b"a".repeat(99_999));
        nested.push(b'.');
        assert!(run(&nested).is_ok());
    }

    #[test]
    fn copies_of_memoized_objects_are_budgeted() {
        // A 1000-item list, then set(list) 10000 times from the memo: a bomb.
        let mut data = b"]q\x00(".to_vec();
        data.extend(b"K\x01".repeat(1000));
        data.extend(b"e0");
        for _ in 0..10_000 {
            data.extend(b"c__builtin__\nset\nh\x00\x85R0");
        }
        data.extend(b"N.");
        assert!(run(&data).unwrap_err().contains("expands"));
    }
}
