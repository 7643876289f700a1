//! Property: for arbitrary owned programs (every table, absent and empty fields, any enum value,
//! segments, inline blobs), write -> load gives an equal program, and write∘load∘write = write,
//! in both serializer layouts. `PROPTEST_CASES` raises the case count.

#![forbid(unsafe_code)]

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use pte::format::{self, Layout, WriteOptions};
use pte::program::*;

fn small<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    vec(s, 0..4)
}

fn name() -> impl Strategy<Value = String> {
    "[a-z_:.]{0,12}"
}

fn bytes() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..40).prop_map(Bytes)
}

fn finite() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("NaN compares unequal", |f| !f.is_nan())
}

fn tensor() -> impl Strategy<Value = Tensor> {
    (
        (any::<i8>(), any::<i32>(), option::of(small(any::<i32>())), option::of(small(any::<u8>())), any::<bool>()),
        (
            any::<i8>(),
            any::<u32>(),
            option::of((any::<u32>(), any::<u32>(), any::<u32>())),
            any::<i8>(),
            option::of((any::<u64>(), option::of(name()), any::<i8>(), any::<i8>(), any::<i8>())),
        ),
    )
        .prop_map(|((st, so, sizes, dim_order, rg), (layout, dbi, alloc, dyn_, extra))| Tensor {
            scalar_type: ScalarType(st),
            storage_offset: so,
            sizes,
            dim_order,
            requires_grad: rg,
            layout,
            data_buffer_idx: dbi,
            allocation_info: alloc.map(|(m, l, h)| AllocationDetails {
                memory_id: m,
                memory_offset_low: l,
                memory_offset_high: h,
            }),
            shape_dynamism: TensorShapeDynamism(dyn_),
            extra_tensor_info: extra.map(|(idx, fqn, loc, dt, di)| ExtraTensorInfo {
                mutable_data_segments_idx: idx,
                fully_qualified_name: fqn,
                location: TensorDataLocation(loc),
                device_type: DeviceType(dt),
                device_index: di,
            }),
        })
}

fn evalue() -> impl Strategy<Value = EValue> {
    prop_oneof![
        Just(EValue::Null),
        any::<i64>().prop_map(EValue::Int),
        any::<bool>().prop_map(EValue::Bool),
        finite().prop_map(EValue::Double),
        tensor().prop_map(EValue::Tensor),
        option::of(name()).prop_map(EValue::String),
        option::of(small(any::<i64>())).prop_map(EValue::IntList),
        option::of(small(finite())).prop_map(EValue::DoubleList),
        option::of(small(any::<bool>())).prop_map(EValue::BoolList),
        option::of(small(any::<i32>())).prop_map(EValue::TensorList),
        option::of(small(any::<i32>())).prop_map(EValue::OptionalTensorList),
    ]
}

fn instruction() -> impl Strategy<Value = Instruction> {
    let args = || option::of(small(any::<i32>()));
    prop_oneof![
        (any::<i32>(), args()).prop_map(|(op_index, args)| Instruction::KernelCall(KernelCall { op_index, args })),
        (any::<i32>(), args())
            .prop_map(|(delegate_index, args)| Instruction::DelegateCall(DelegateCall { delegate_index, args })),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Instruction::MoveCall(MoveCall { move_from: a, move_to: b })),
        (any::<i32>(), any::<i32>()).prop_map(|(a, b)| Instruction::JumpFalseCall(JumpFalseCall {
            cond_value_index: a,
            destination_instruction: b
        })),
        any::<i32>().prop_map(|v| Instruction::FreeCall(FreeCall { value_index: v })),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (option::of(name()), any::<i32>(), option::of(name()), option::of(name()))
        .prop_map(|(filename, lineno, name, context)| Frame { filename, lineno, name, context })
}

fn chain() -> impl Strategy<Value = Chain> {
    (
        option::of(small(any::<i32>())),
        option::of(small(any::<i32>())),
        option::of(vec(instruction(), 0..6)),
        option::of(small(option::of(small(frame())).prop_map(|items| FrameList { items }))),
    )
        .prop_map(|(inputs, outputs, instructions, stacktrace)| Chain {
            inputs,
            outputs,
            instructions,
            stacktrace,
        })
}

fn delegate() -> impl Strategy<Value = BackendDelegate> {
    (
        option::of(name()),
        option::of((0i8..2, any::<u32>())),
        option::of(small(
            (option::of(name()), option::of(bytes())).prop_map(|(key, value)| CompileSpec { key, value }),
        )),
    )
        .prop_map(|(id, processed, compile_specs)| BackendDelegate {
            id,
            processed: processed.map(|(l, i)| BackendDelegateDataReference { location: DataLocation(l), index: i }),
            compile_specs,
        })
}

fn plan() -> impl Strategy<Value = ExecutionPlan> {
    (
        (
            option::of(name()),
            option::of((option::of(name()), option::of(name()))),
            option::of(vec(evalue(), 0..6)),
            option::of(small(any::<i32>())),
            option::of(small(any::<i32>())),
        ),
        (
            option::of(small(chain())),
            option::of(small(
                (option::of(name()), option::of(name())).prop_map(|(name, overload)| Operator { name, overload }),
            )),
            option::of(small(delegate())),
            option::of(small(any::<i64>())),
            option::of(small((any::<i32>(), any::<i8>(), any::<i8>()).prop_map(|(b, t, i)| NonConstBufferDevice {
                buffer_idx: b,
                device_type: DeviceType(t),
                device_index: i,
            }))),
        ),
    )
        .prop_map(|((name, meta, values, inputs, outputs), (chains, operators, delegates, sizes, devices))| {
            ExecutionPlan {
                name,
                container_meta_type: meta.map(|(i, o)| ContainerMetadata { encoded_inp_str: i, encoded_out_str: o }),
                values,
                inputs,
                outputs,
                chains,
                operators,
                delegates,
                non_const_buffer_sizes: sizes,
                non_const_buffer_device: devices,
            }
        })
}

/// An arbitrary program plus its segment bytes, with every data reference made resolvable.
fn program() -> impl Strategy<Value = (Program, Vec<Vec<u8>>)> {
    (
        any::<u32>(),
        option::of(vec(plan(), 0..3)),
        // Inline constants are the program's constants (the placeholder-only constant segment
        // below leaves them in use), so each has its storage: one without is refused at load.
        option::of(small(bytes().prop_map(|b| Buffer { storage: Some(b) }))),
        option::of(small(bytes())),
        vec((vec(any::<u8>(), 0..300), prop_oneof![Just(1u64), Just(16), Just(64), Just(256)]), 0..4),
        any::<bool>(),
        option::of(small(name())),
        (any::<bool>(), small(any::<u64>())),
    )
        .prop_map(|(version, plans, constant_buffer, inline, segs, want_const, named, (want_mut, mut_offsets))| {
            let seg_data: Vec<Vec<u8>> = segs.iter().map(|(d, _)| d.clone()).collect();
            let layout: Vec<(u64, u64)> = segs.iter().map(|(d, a)| (d.len() as u64, *a)).collect();
            let segments = format::layout_segments(&layout, 128);
            let n_seg = segments.len();
            let backend_delegate_data =
                inline.map(|v| v.into_iter().map(|d| BackendDelegateInlineData { data: Some(d) }).collect::<Vec<_>>());
            let n_inline = backend_delegate_data.as_ref().map_or(0, Vec::len);
            let mut plans = plans;
            for p in plans.iter_mut().flatten() {
                for d in p.delegates.iter_mut().flatten() {
                    d.processed = match d.processed {
                        Some(r) if r.location == DataLocation::INLINE && n_inline > 0 => {
                            Some(BackendDelegateDataReference {
                                location: r.location,
                                index: r.index % n_inline as u32,
                            })
                        }
                        Some(r) if n_seg > 0 => Some(BackendDelegateDataReference {
                            location: DataLocation::SEGMENT,
                            index: r.index % n_seg as u32,
                        }),
                        _ => None,
                    };
                }
            }
            let seg_len = |i: usize| seg_data[i].len() as u64;
            let constant_segment = if want_const && n_seg > 0 {
                Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0, 0, seg_len(0) / 2]) })
            } else {
                Some(SubsegmentOffsets { segment_index: 0, offsets: Some(vec![0]) })
            };
            let constant_buffer = if want_const && n_seg > 0 { Some(vec![]) } else { constant_buffer };
            let mutable_data_segments = (want_mut && n_seg > 0).then(|| {
                let s = n_seg - 1;
                vec![SubsegmentOffsets {
                    segment_index: s as u32,
                    offsets: Some(mut_offsets.iter().map(|o| o % (seg_len(s) + 1)).collect()),
                }]
            });
            let named_data = if n_seg > 0 {
                named.map(|keys| {
                    keys.into_iter()
                        .enumerate()
                        .map(|(i, k)| NamedData { key: Some(k), segment_index: (i % n_seg) as u32 })
                        .collect()
                })
            } else {
                None
            };
            let program = Program {
                version,
                execution_plan: plans,
                constant_buffer,
                backend_delegate_data,
                segments: Some(segments),
                constant_segment,
                mutable_data_segments,
                named_data,
            };
            (program, seg_data)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(128),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/format_roundtrip.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn write_load_is_identity_and_write_is_idempotent((program, seg_data) in program(), flatc in any::<bool>()) {
        let layout = if flatc { Layout::Flatc } else { Layout::PythonBuilder };
        let opts = WriteOptions { layout, ..WriteOptions::default() };
        let refs: Vec<&[u8]> = seg_data.iter().map(Vec::as_slice).collect();
        let bytes = format::write(&program, &refs, &opts).expect("writes");
        let loaded = format::load(&bytes).map_err(|e| TestCaseError::fail(format!("load: {e}")))?;
        prop_assert_eq!(&loaded.program, &program);
        for (i, d) in seg_data.iter().enumerate() {
            prop_assert_eq!(loaded.segments[i], d.as_slice());
        }
        let again = format::write_loaded(&loaded, &opts).expect("rewrites");
        prop_assert_eq!(again, bytes);
        // The JSON view reads back to the same program unless some bytes were too long to print
        // whole (shown as `hex_head64`), and then it is refused rather than read short.
        let json = serde_json::to_value(&program).expect("serialises");
        let truncated = json.to_string().contains("\"hex_head64\"");
        match serde_json::from_value::<Program>(json) {
            Ok(back) => {
                prop_assert!(!truncated, "a JSON view with truncated bytes read back");
                prop_assert_eq!(back, program);
            }
            Err(e) => prop_assert!(truncated, "the JSON view does not read back: {}", e),
        }
    }
}

#[test]
fn force_aligned_inline_blobs_start_16_aligned() {
    for n in [1usize, 3, 17, 100] {
        let p = Program {
            execution_plan: Some(vec![]),
            constant_buffer: Some(vec![Buffer { storage: Some(Bytes(vec![9; n])) }]),
            backend_delegate_data: Some(vec![BackendDelegateInlineData { data: Some(Bytes(vec![5; n + 1])) }]),
            segments: Some(vec![]),
            ..Program::default()
        };
        let out = format::write(&p, &[], &WriteOptions::default()).expect("writes");
        let loaded = format::load(&out).expect("loads");
        for blob in [loaded.inline_delegate_data[0], loaded.constants[0]] {
            let at = blob.as_ptr() as usize - out.as_ptr() as usize;
            assert_eq!(at % 16, 0, "blob of {} bytes at file offset {at}", blob.len());
        }
    }
}

#[test]
fn segment_alignment_is_the_least_common_multiple() {
    use pte::format::header::lcm;
    assert_eq!(lcm(4, 6), 12);
    assert_eq!(lcm(16, 128), 128);
    assert_eq!(lcm(48, 32), 96);
    assert_eq!(lcm(7, 5), 35);
    assert_eq!(lcm(0, 8), 8);
    assert_eq!(lcm(8, 0), 8);
    assert_eq!(lcm(1, 1), 1);
}
