//! torch.save zip archives (`.pt`, torch >= 1.6's default format), read without executing
//! pickle code.
//!
//! Layout: `<prefix>/data.pkl` (the pickled object, storages as persistent ids),
//! `<prefix>/byteorder` (`little`; absent before torch 1.10), and one uncompressed entry
//! `<prefix>/data/<key>` per storage, which [`TensorEntry::storage`] points into: the storage
//! bytes are never copied.
//!
//! The unpickled object is flattened into entries ([`read_entries`]); the probe's input-set
//! encoding (`{"__dump_probe_tensor__": 1, "span": ..., ...}`, docs/manifest.md) is read as the
//! tensor it describes.

use std::io::Cursor;
use std::ops::Range;

use zip::{CompressionMethod, ZipArchive};

use super::pickle::{self, ObjId, Pickle, Value};
use super::{DType, TensorEntry};

/// Deepest container nesting the flattening follows (a cycle also ends here).
pub const MAX_DEPTH: usize = 1000;
/// Most containers and tensors the flattening visits (shared sub-objects count each time).
pub const MAX_VISITS: usize = 1 << 22;
/// Longest key path, in bytes.
pub const MAX_KEY_BYTES: usize = 4096;
/// Most bytes the table of entries may take (keys, shapes, strides, the entries themselves).
pub const MAX_TABLE_BYTES: usize = 128 << 20;

/// Reads the table of tensors of a torch.save zip archive held in `bytes`, in pickle order.
///
/// Keys: `""` for a bare tensor; dict keys (strings, integers in decimal) and list or tuple
/// indices joined by `.` (`"layers.0.weight"`). Values that are not tensors are skipped.
/// Tensors sharing a storage each get the storage's whole byte range with their own offset
/// and strides.
///
/// # Errors
/// A message naming the problem: a damaged zip, no `data.pkl` (not a torch.save archive, or
/// the legacy format), a big-endian archive, a compressed entry, a refused pickle global or
/// other pickle damage, a storage missing from the archive, an unread dtype, or a view that
/// does not fit its storage (naming the tensor's key).
pub fn read_entries(bytes: &[u8]) -> Result<Vec<TensorEntry>, String> {
    let pickle = read_pickle(bytes)?;
    let mut flat = Flatten {
        pickle: &pickle,
        file_len: bytes.len(),
        entries: Vec::new(),
        path: String::new(),
        visits: 0,
        table_bytes: 0,
    };
    flat.visit(pickle.root, 0)?;
    Ok(flat.entries)
}

/// The unpickled object of a torch.save zip archive held in `bytes`: the object graph, each
/// storage resolved to the byte range of its `<prefix>/data/<key>` entry inside `bytes`.
///
/// # Errors
/// As [`read_entries`] up to and including the pickle: a damaged or truncated zip, no
/// `data.pkl`, a big-endian archive, a compressed entry, a refused pickle global
/// (`"archive/data.pkl: pickle ...: refused pickle global `posix.system` ..."`) or other
/// pickle damage, a storage missing from the archive.
pub fn read_pickle(bytes: &[u8]) -> Result<Pickle, String> {
    let mut archive = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("damaged zip archive (truncated or not a torch.save file): {e}"))?;
    let prefix = find_prefix(&archive)?;

    if let Some(index) = archive.index_for_name(&format!("{prefix}/byteorder")) {
        let range = stored_range(&mut archive, index, bytes.len())?;
        let order = String::from_utf8_lossy(&bytes[range]);
        match order.trim() {
            "little" => {}
            "big" => {
                return Err(
                    "big-endian archive (byteorder `big`): dumpview reads little-endian \
                            data only; load and save it again on a little-endian machine"
                        .into(),
                );
            }
            other => {
                let other: String = other.chars().take(40).collect();
                return Err(format!("unknown byteorder `{}`", other.escape_debug()));
            }
        }
    }

    let pkl_index = archive
        .index_for_name(&format!("{prefix}/data.pkl"))
        .ok_or("no data.pkl")?;
    let pkl = stored_range(&mut archive, pkl_index, bytes.len())?;
    let mut load_storage = |key: &str| -> Result<Range<usize>, String> {
        let name = format!("{prefix}/data/{key}");
        let index = archive.index_for_name(&name).ok_or_else(|| {
            let key: String = key.chars().take(80).collect();
            format!(
                "storage `{}` is missing from the archive",
                key.escape_debug()
            )
        })?;
        stored_range(&mut archive, index, bytes.len())
    };
    pickle::unpickle(&bytes[pkl], &mut load_storage).map_err(|e| format!("{prefix}/data.pkl: {e}"))
}

/// The directory holding `data.pkl`: torch writes `<prefix>/data.pkl` with one top-level
/// `<prefix>` (usually `archive`).
fn find_prefix<R: std::io::Read + std::io::Seek>(
    archive: &ZipArchive<R>,
) -> Result<String, String> {
    let prefix = archive.file_names().find_map(|name| {
        let prefix = name.strip_suffix("/data.pkl")?;
        (!prefix.is_empty() && !prefix.contains('/')).then(|| prefix.to_owned())
    });
    prefix.ok_or_else(|| {
        "zip archive without `<prefix>/data.pkl`: not a torch.save file (torch >= 1.6 zip \
         format; TorchScript and other zip files are not read)"
            .into()
    })
}

/// The byte range of entry `index`'s data inside the file: entries must be stored, not
/// compressed, so their bytes are usable in place.
fn stored_range(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    index: usize,
    file_len: usize,
) -> Result<Range<usize>, String> {
    let entry = archive
        .by_index_raw(index)
        .map_err(|e| format!("damaged zip entry #{index}: {e}"))?;
    let name: String = entry.name().chars().take(200).collect();
    if entry.encrypted() {
        return Err(format!("entry `{name}` is encrypted"));
    }
    if entry.compression() != CompressionMethod::Stored {
        return Err(format!(
            "entry `{name}` is compressed ({}); torch.save stores entries uncompressed and \
             dumpview reads them in place: save the tensors again with torch.save",
            method_name(entry.compression())
        ));
    }
    if entry.size() != entry.compressed_size() {
        return Err(format!(
            "damaged zip entry `{name}`: stored with size {} but compressed size {}",
            entry.size(),
            entry.compressed_size()
        ));
    }
    let start = entry
        .data_start()
        .ok_or_else(|| format!("damaged zip entry `{name}`: no data offset"))?;
    let end = start.checked_add(entry.size());
    match (
        usize::try_from(start),
        end.and_then(|e| usize::try_from(e).ok()),
    ) {
        (Ok(start), Some(end)) if end <= file_len => Ok(start..end),
        _ => Err(format!(
            "entry `{name}` ({} bytes at byte {start}) extends beyond the end of the file \
             ({file_len} bytes): truncated archive",
            entry.size()
        )),
    }
}

/// A zip compression method's usual name (the crate is built without decompressors, so it
/// knows most methods only by number).
fn method_name(method: CompressionMethod) -> String {
    #[allow(deprecated)]
    let number = method.to_u16();
    let name = match number {
        8 => "deflate",
        9 => "deflate64",
        12 => "bzip2",
        14 => "lzma",
        93 => "zstd",
        95 => "xz",
        98 => "ppmd",
        99 => "AES encryption",
        _ => "unknown method",
    };
    format!("{name}, method {number}")
}

/// The walk from the unpickled root to tensor entries.
struct Flatten<'p> {
    pickle: &'p Pickle,
    file_len: usize,
    entries: Vec<TensorEntry>,
    /// Key path of the object being visited.
    path: String,
    visits: usize,
    table_bytes: usize,
}

impl Flatten<'_> {
    fn visit(&mut self, id: ObjId, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "the saved object is nested deeper than {MAX_DEPTH} levels (or holds a cycle) at `{}`",
                short(&self.path)
            ));
        }
        self.visits += 1;
        if self.visits > MAX_VISITS {
            return Err(format!(
                "the saved object has more than {MAX_VISITS} containers and tensors"
            ));
        }
        let pickle = self.pickle;
        match pickle.get(id) {
            Value::Tensor(t) => {
                let dtype = self.dtype(t.dtype)?;
                self.emit(
                    dtype,
                    &t.shape,
                    &t.strides,
                    t.storage_offset,
                    t.storage.clone(),
                )
            }
            Value::List(items) | Value::Tuple(items) | Value::Set(items) => {
                self.visit_items(items, depth)
            }
            Value::Dict(pairs) => self.visit_dict(pairs, depth),
            _ => Ok(()),
        }
    }

    fn visit_items(&mut self, items: &[ObjId], depth: usize) -> Result<(), String> {
        for (i, &item) in items.iter().enumerate() {
            if holds_tensors(self.pickle.get(item)) {
                let mark = self.push_segment(&i.to_string())?;
                self.visit(item, depth + 1)?;
                self.path.truncate(mark);
            }
        }
        Ok(())
    }

    fn visit_dict(&mut self, pairs: &[(ObjId, ObjId)], depth: usize) -> Result<(), String> {
        let pickle = self.pickle;
        let marker = pairs.iter().find_map(|&(k, _)| match pickle.get(k) {
            Value::Str(s) if s.starts_with("__dump_probe_") => Some(s.as_str()),
            _ => None,
        });
        match marker {
            Some("__dump_probe_tensor__") => return self.probe_tensor(pairs),
            Some("__dump_probe_seq__" | "__dump_probe_dict__") => {
                return match field(pickle, pairs, "items") {
                    Some(items) => self.visit(items, depth + 1),
                    None => Err(format!(
                        "probe value `{}` has no `items`",
                        short(&self.path)
                    )),
                };
            }
            // dtype, device and repr markers: not tensors.
            Some(_) => return Ok(()),
            None => {}
        }
        for &(key, value) in pairs {
            if holds_tensors(pickle.get(value)) {
                let segment = key_text(pickle.get(key));
                let mark = self.push_segment(&segment)?;
                self.visit(value, depth + 1)?;
                self.path.truncate(mark);
            }
        }
        Ok(())
    }

    /// The probe's `{"__dump_probe_tensor__": 1, "span": tensor, "shape": [...], "stride":
    /// [...], "offset_in_span": n, "dtype": name, ...}`: the view over `span`'s storage.
    fn probe_tensor(&mut self, pairs: &[(ObjId, ObjId)]) -> Result<(), String> {
        let pickle = self.pickle;
        let key = short(&self.path);
        let get = |name: &str| {
            field(pickle, pairs, name)
                .map(|id| pickle.get(id))
                .ok_or_else(|| format!("probe tensor `{key}` has no `{name}`"))
        };
        let Value::Tensor(span) = get("span")? else {
            return Err(format!("probe tensor `{key}`: `span` is not a tensor"));
        };
        if span.complex {
            // Its shape and strides count complex elements; the span's real view counts halves.
            return Err(format!(
                "probe tensor `{key}`: a complex input set's tensor is not read by dumpview"
            ));
        }
        let dims = |name: &str| -> Result<Vec<usize>, String> {
            let items = match get(name)? {
                Value::List(items) | Value::Tuple(items) if items.len() <= pickle::MAX_RANK => {
                    items
                }
                _ => return Err(format!("probe tensor `{key}`: bad `{name}`")),
            };
            items
                .iter()
                .map(|&i| non_negative(pickle.get(i)))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("probe tensor `{key}`: bad `{name}`"))
        };
        let shape = dims("shape")?;
        let strides = dims("stride")?;
        let offset = non_negative(get("offset_in_span")?)
            .and_then(|o| o.checked_add(span.storage_offset))
            .ok_or_else(|| format!("probe tensor `{key}`: bad `offset_in_span`"))?;
        let dtype = self.dtype(span.dtype)?;
        if let Value::Str(name) = get("dtype")? {
            if DType::from_name(name).is_some_and(|named| named != dtype) {
                return Err(format!(
                    "probe tensor `{key}`: dtype `{}` but its span holds {dtype}",
                    short(name)
                ));
            }
        }
        self.emit(dtype, &shape, &strides, offset, span.storage.clone())
    }

    fn dtype(&self, dtype: Result<DType, &'static str>) -> Result<DType, String> {
        dtype.map_err(|name| {
            let what = if name.ends_with("Storage") {
                "storage type"
            } else {
                "dtype"
            };
            format!(
                "tensor {:?}: {what} torch.{name} is not read by dumpview",
                short(&self.path)
            )
        })
    }

    fn emit(
        &mut self,
        dtype: DType,
        shape: &[usize],
        strides: &[usize],
        storage_offset: usize,
        storage: Range<usize>,
    ) -> Result<(), String> {
        self.table_bytes += std::mem::size_of::<TensorEntry>() + self.path.len() + 16 * shape.len();
        if self.table_bytes > MAX_TABLE_BYTES {
            return Err(format!(
                "the saved object's table of tensors exceeds {} MiB ({} tensors so far)",
                MAX_TABLE_BYTES >> 20,
                self.entries.len()
            ));
        }
        self.entries.push(TensorEntry::new(
            self.path.clone(),
            dtype,
            shape.to_vec(),
            strides.to_vec(),
            storage_offset,
            storage,
            self.file_len,
        )?);
        Ok(())
    }

    /// Appends `.segment` to the path; returns the length to truncate back to.
    fn push_segment(&mut self, segment: &str) -> Result<usize, String> {
        let mark = self.path.len();
        if mark + 1 + segment.len() > MAX_KEY_BYTES {
            return Err(format!(
                "a tensor's key path is longer than {MAX_KEY_BYTES} bytes: `{}`",
                short(&self.path)
            ));
        }
        if mark > 0 {
            self.path.push('.');
        }
        self.path.push_str(segment);
        Ok(mark)
    }
}

/// Whether visiting `value` can find a tensor (scalars and strings are skipped unvisited).
fn holds_tensors(value: &Value) -> bool {
    matches!(
        value,
        Value::Tensor(_) | Value::List(_) | Value::Tuple(_) | Value::Set(_) | Value::Dict(_)
    )
}

/// The value under string key `name` of a dict.
fn field(pickle: &Pickle, pairs: &[(ObjId, ObjId)], name: &str) -> Option<ObjId> {
    pairs
        .iter()
        .find(|&&(k, _)| matches!(pickle.get(k), Value::Str(s) if s == name))
        .map(|&(_, v)| v)
}

fn non_negative(value: &Value) -> Option<usize> {
    match value {
        Value::Int(v) => usize::try_from(*v).ok(),
        _ => None,
    }
}

/// A dict key as a path segment: strings as they are, integers in decimal.
fn key_text(key: &Value) -> String {
    match key {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::None => "None".into(),
        Value::Float(f) => f.to_string(),
        other => format!("<{}>", other.kind()),
    }
}

/// At most 200 characters of a key, for messages.
fn short(text: &str) -> String {
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use zip::write::{SimpleFileOptions, ZipWriter};

    use super::*;

    fn text(s: &str) -> Vec<u8> {
        let mut out = vec![b'X'];
        out.extend((s.len() as u32).to_le_bytes());
        out.extend(s.as_bytes());
        out
    }

    fn tuple(items: &[u8]) -> Vec<u8> {
        let mut out = vec![b'('];
        for &i in items {
            out.extend([b'K', i]);
        }
        out.push(b't');
        out
    }

    /// `_rebuild_tensor_v2(storage <key>, offset, shape, stride, False, None)`.
    fn tensor(key: &str, class: &str, offset: u8, shape: &[u8], stride: &[u8]) -> Vec<u8> {
        let mut out = b"ctorch._utils\n_rebuild_tensor_v2\n((".to_vec();
        out.extend(text("storage"));
        out.extend(format!("ctorch\n{class}\n").bytes());
        out.extend(text(key));
        out.extend(text("cpu"));
        out.extend(b"K\x00tQK");
        out.push(offset);
        out.extend(tuple(shape));
        out.extend(tuple(stride));
        out.extend(b"\x89NtR");
        out
    }

    fn dict(pairs: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = b"}(".to_vec();
        for (k, v) in pairs {
            out.extend(text(k));
            out.extend(v);
        }
        out.push(b'u');
        out
    }

    /// A stored zip: `archive/data.pkl` = `pickle` + STOP, the given storages and byteorder.
    fn archive(pickle: &[u8], storages: &[(&str, Vec<u8>)], byteorder: &str) -> Vec<u8> {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .with_alignment(64);
        let mut data = b"\x80\x02".to_vec();
        data.extend(pickle);
        data.push(b'.');
        zip.start_file("archive/data.pkl", options).unwrap();
        zip.write_all(&data).unwrap();
        zip.start_file("archive/byteorder", options).unwrap();
        zip.write_all(byteorder.as_bytes()).unwrap();
        for (key, bytes) in storages {
            zip.start_file(format!("archive/data/{key}"), options)
                .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    fn floats(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
        values.into_iter().flat_map(f32::to_le_bytes).collect()
    }

    fn read(bytes: &[u8], entry: &TensorEntry) -> Vec<f64> {
        let view = super::super::TensorView::new(
            entry.dtype,
            entry.shape.clone(),
            entry.strides.clone(),
            entry.storage_offset,
            &bytes[entry.storage.clone()],
        )
        .unwrap();
        (0..view.numel()).map(|i| view.get(i)).collect()
    }

    #[test]
    fn views_sharing_a_storage_point_into_the_file() {
        let pickle = dict(&[
            ("w", tensor("0", "FloatStorage", 0, &[2, 3], &[3, 1])),
            ("wt", tensor("0", "FloatStorage", 0, &[3, 2], &[1, 3])),
            ("row", tensor("0", "FloatStorage", 3, &[3], &[1])),
        ]);
        let bytes = archive(
            &pickle,
            &[("0", floats((0..6).map(|v| v as f32)))],
            "little",
        );
        let entries = read_entries(&bytes).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["w", "wt", "row"]);
        assert!(entries.iter().all(|e| e.storage == entries[0].storage));
        assert_eq!(entries[0].storage.start % 64, 0, "torch-style alignment");
        assert_eq!(read(&bytes, &entries[1]), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert_eq!(read(&bytes, &entries[2]), [3.0, 4.0, 5.0]);
    }

    #[test]
    fn nested_containers_and_probe_dicts_flatten_to_keys() {
        let mut probe = b"}(".to_vec();
        probe.extend(text("__dump_probe_tensor__"));
        probe.extend(b"K\x01");
        probe.extend(text("span"));
        probe.extend(tensor("0", "FloatStorage", 1, &[5], &[1]));
        for (name, items) in [("shape", b"K\x02K\x02"), ("stride", b"K\x01K\x02")] {
            probe.extend(text(name));
            probe.extend(b"](");
            probe.extend(items);
            probe.push(b'e');
        }
        probe.extend(text("offset_in_span"));
        probe.extend(b"K\x01");
        probe.extend(text("dtype"));
        probe.extend(text("float32"));
        probe.push(b'u');
        let mut seq = b"}(".to_vec();
        seq.extend(text("__dump_probe_seq__"));
        seq.extend(text("list"));
        seq.extend(text("items"));
        seq.extend(b"](");
        seq.extend(text("not a tensor"));
        seq.extend(tensor("0", "FloatStorage", 0, &[], &[]));
        seq.extend(b"eu");
        let layers = {
            let mut l = b"](".to_vec();
            l.extend(dict(&[(
                "weight",
                tensor("0", "FloatStorage", 2, &[2], &[1]),
            )]));
            l.extend(b"e");
            l
        };
        let pickle = dict(&[
            ("x", probe),
            ("args", seq),
            ("layers", layers),
            ("dtype", {
                let mut d = b"}(".to_vec();
                d.extend(text("__dump_probe_dtype__"));
                d.extend(text("float16"));
                d.push(b'u');
                d
            }),
        ]);
        let bytes = archive(
            &pickle,
            &[("0", floats((0..6).map(|v| v as f32)))],
            "little\n",
        );
        let entries = read_entries(&bytes).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["x", "args.1", "layers.0.weight"]);
        // span starts at element 1, offset_in_span 1: the view starts at element 2.
        assert_eq!(entries[0].storage_offset, 2);
        assert_eq!(read(&bytes, &entries[0]), [2.0, 4.0, 3.0, 5.0]);
        assert_eq!(read(&bytes, &entries[1]), [0.0]);
        assert_eq!(read(&bytes, &entries[2]), [2.0, 3.0]);
    }

    #[test]
    fn damaged_archives_are_refused_with_reasons() {
        let good = tensor("0", "FloatStorage", 0, &[2], &[1]);
        let storage = [("0", floats([1.0, 2.0]))];

        let err = read_entries(&archive(&good, &storage, "big")).unwrap_err();
        assert!(err.contains("big-endian"), "{err}");

        let short = tensor("0", "FloatStorage", 0, &[3], &[1]);
        let err = read_entries(&archive(&dict(&[("q", short)]), &storage, "little")).unwrap_err();
        assert!(err.contains("tensor \"q\": storage holds 8 bytes"), "{err}");

        let err = read_entries(&archive(&good, &[("1", floats([1.0]))], "little")).unwrap_err();
        assert!(err.contains("storage `0` is missing"), "{err}");

        let bytes = archive(&good, &storage, "little");
        let err = read_entries(&bytes[..bytes.len() - 30]).unwrap_err();
        assert!(err.contains("damaged zip archive"), "{err}");

        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("model/constants.pkl", SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"\x80\x02N.").unwrap();
        let err = read_entries(&zip.finish().unwrap().into_inner()).unwrap_err();
        assert!(err.contains("without `<prefix>/data.pkl`"), "{err}");

        let bad = b"cposix\nsystem\n(S'touch /tmp/pwned'\ntR";
        let err = read_entries(&archive(bad, &storage, "little")).unwrap_err();
        assert!(err.starts_with("archive/data.pkl: pickle"), "{err}");
        assert!(
            err.contains("refused pickle global `posix.system`"),
            "{err}"
        );
    }

    #[test]
    fn cycles_and_deep_nesting_end_with_an_error() {
        // A list that contains itself: `]q\x00h\x00a`.
        let bytes = archive(b"]q\x00h\x00a", &[], "little");
        let err = read_entries(&bytes).unwrap_err();
        assert!(err.contains("deeper than 1000 levels"), "{err}");
        let mut nested = b"]".repeat(5000);
        nested.extend(b"a".repeat(4999));
        let err = read_entries(&archive(&nested, &[], "little")).unwrap_err();
        assert!(err.contains("deeper than 1000 levels"), "{err}");
    }

    #[test]
    fn shared_subtrees_are_bounded() {
        // l0 = [t]; l(n+1) = [ln, ln]: 2^40 paths to one tensor.
        let mut pickle = b"](".to_vec();
        pickle.extend(tensor("0", "FloatStorage", 0, &[1], &[1]));
        pickle.extend(b"e");
        for _ in 0..40 {
            pickle.extend(b"2\x86");
        }
        let bytes = archive(&pickle, &[("0", floats([1.0]))], "little");
        let err = read_entries(&bytes).unwrap_err();
        assert!(
            err.contains("exceeds") || err.contains("more than"),
            "{err}"
        );
    }

    #[test]
    fn unread_dtypes_name_the_tensor() {
        let bytes = archive(
            &dict(&[("q", tensor("0", "QInt8Storage", 0, &[1], &[1]))]),
            &[("0", vec![1u8])],
            "little",
        );
        let err = read_entries(&bytes).unwrap_err();
        assert!(
            err.contains("tensor \"q\": storage type torch.QInt8Storage is not read"),
            "{err}"
        );
    }

    /// Issue 31, item 5: a complex tensor reads as its real view (torch.view_as_real), a
    /// transposed view and an offset one included.
    #[test]
    fn complex_tensors_read_as_their_real_view() {
        // Storage of 6 complex64 values (k + 10k i), viewed [2, 3] and transposed [3, 2], and
        // a 2-element view from element 4.
        let values: Vec<f32> = (0..6).flat_map(|k| [k as f32, 10.0 * k as f32]).collect();
        let pickle = dict(&[
            ("c", tensor("0", "ComplexFloatStorage", 0, &[2, 3], &[3, 1])),
            (
                "ct",
                tensor("0", "ComplexFloatStorage", 0, &[3, 2], &[1, 3]),
            ),
            ("tail", tensor("0", "ComplexFloatStorage", 4, &[2], &[1])),
        ]);
        let bytes = archive(&pickle, &[("0", floats(values))], "little");
        let entries = read_entries(&bytes).unwrap();
        assert_eq!(entries[0].dtype, DType::Float32);
        assert_eq!(entries[0].shape, [2, 3, 2]);
        assert_eq!(entries[0].strides, [6, 2, 1]);
        assert_eq!(
            read(&bytes, &entries[0]),
            [
                0.0, 0.0, 1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0, 5.0, 50.0
            ]
        );
        assert_eq!(
            read(&bytes, &entries[1]),
            [
                0.0, 0.0, 3.0, 30.0, 1.0, 10.0, 4.0, 40.0, 2.0, 20.0, 5.0, 50.0
            ]
        );
        assert_eq!(read(&bytes, &entries[2]), [4.0, 40.0, 5.0, 50.0]);
    }
}
