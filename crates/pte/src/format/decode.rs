//! The second reader: the `flatbuffers` crate's verifier, then its generated accessors ->
//! owned [`Program`](crate::program::Program). Not on the load path (that is [`super::wire`]);
//! [`super::oracle`] runs it beside the loader so the two check each other.
//!
//! Decoding runs only after the crate's verifier accepted the buffer. Charges every owned allocation against a
//! budget proportional to the input, so a buffer whose tables are shared many times over (a DAG
//! that expands into a huge tree) is rejected instead of exhausting memory. Rejects union tags
//! the schema does not declare, with the field path.
//! May not touch: the load path (only `format::oracle` calls it), bytes past the FlatBuffers data.

use super::FormatError;
use super::generated::executorch_flatbuffer as fb;
use crate::program::*;

/// The crate's verifier with `opts`, then decoding: `program_data` of a file of `input_len` bytes.
pub(crate) fn decode_with_crate(
    program_data: &[u8],
    opts: &flatbuffers::VerifierOptions,
    input_len: usize,
) -> Result<Program, FormatError> {
    let fb_program = flatbuffers::root_with_opts::<fb::Program>(opts, program_data).map_err(|e| {
        use flatbuffers::InvalidFlatbuffer as E;
        let detail = e.to_string().trim().replace('\n', " ").replace('\t', "");
        match e {
            E::TooManyTables | E::ApparentSizeTooLarge | E::DepthLimitReached => FormatError::VerifierLimit { detail },
            _ => FormatError::Malformed { detail },
        }
    })?;
    Decoder::new(input_len).program(fb_program)
}

/// Converts verified accessors into owned values within a memory budget.
pub(crate) struct Decoder {
    used: usize,
    budget: usize,
    input_len: usize,
}

type R<T> = Result<T, FormatError>;

impl Decoder {
    pub(crate) fn new(input_len: usize) -> Self {
        // Owned values are larger than their wire form (an EValue is ~100 bytes, its wire
        // offset 4): allow a generous multiple of the input, plus a floor for tiny inputs.
        let budget = input_len.saturating_mul(48).saturating_add(1 << 20);
        Decoder { used: 0, budget, input_len }
    }

    fn charge(&mut self, bytes: usize, path: &dyn Fn() -> String) -> R<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.budget {
            return Err(FormatError::DecodeBudgetExceeded {
                budget: self.budget,
                input_len: self.input_len,
                path: path(),
            });
        }
        Ok(())
    }

    fn string(&mut self, s: Option<&str>, path: &dyn Fn() -> String) -> R<Option<String>> {
        match s {
            None => Ok(None),
            Some(s) => {
                self.charge(s.len() + 24, path)?;
                Ok(Some(s.to_string()))
            }
        }
    }

    fn vec<'a, T>(
        &mut self,
        v: Option<flatbuffers::Vector<'a, T>>,
        path: &dyn Fn() -> String,
    ) -> R<Option<Vec<T::Inner>>>
    where
        T: flatbuffers::Follow<'a> + 'a,
    {
        match v {
            None => Ok(None),
            Some(v) => {
                self.charge(v.len() * std::mem::size_of::<T::Inner>() + 24, path)?;
                Ok(Some(v.iter().collect()))
            }
        }
    }

    fn bytes(&mut self, v: Option<flatbuffers::Vector<'_, u8>>, path: &dyn Fn() -> String) -> R<Option<Bytes>> {
        match v {
            None => Ok(None),
            Some(v) => {
                self.charge(v.len() + 24, path)?;
                Ok(Some(Bytes(v.bytes().to_vec())))
            }
        }
    }

    pub(crate) fn program(&mut self, p: fb::Program<'_>) -> R<Program> {
        let root = || "Program".to_string();
        let execution_plan = match p.execution_plan() {
            None => None,
            Some(v) => {
                self.charge(v.len() * std::mem::size_of::<ExecutionPlan>(), &root)?;
                let mut out = Vec::with_capacity(v.len());
                for (i, plan) in v.iter().enumerate() {
                    out.push(self.plan(plan, i)?);
                }
                Some(out)
            }
        };
        let constant_buffer = match p.constant_buffer() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, b) in v.iter().enumerate() {
                    let path = || format!("constant_buffer[{i}].storage");
                    self.charge(std::mem::size_of::<Buffer>(), &path)?;
                    out.push(Buffer { storage: self.bytes(b.storage(), &path)? });
                }
                Some(out)
            }
        };
        let backend_delegate_data = match p.backend_delegate_data() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, b) in v.iter().enumerate() {
                    let path = || format!("backend_delegate_data[{i}].data");
                    self.charge(std::mem::size_of::<BackendDelegateInlineData>(), &path)?;
                    out.push(BackendDelegateInlineData { data: self.bytes(b.data(), &path)? });
                }
                Some(out)
            }
        };
        let segments = match p.segments() {
            None => None,
            Some(v) => {
                self.charge(v.len() * 16 + 24, &|| "segments".to_string())?;
                Some(v.iter().map(|s| DataSegment { offset: s.offset(), size: s.size() }).collect())
            }
        };
        let constant_segment = match p.constant_segment() {
            None => None,
            Some(c) => Some(self.subsegment(c, &|| "constant_segment.offsets".to_string())?),
        };
        let mutable_data_segments = match p.mutable_data_segments() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, c) in v.iter().enumerate() {
                    out.push(self.subsegment(c, &|| format!("mutable_data_segments[{i}].offsets"))?);
                }
                Some(out)
            }
        };
        let named_data = match p.named_data() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, n) in v.iter().enumerate() {
                    let path = || format!("named_data[{i}].key");
                    self.charge(std::mem::size_of::<NamedData>(), &path)?;
                    out.push(NamedData { key: self.string(n.key(), &path)?, segment_index: n.segment_index() });
                }
                Some(out)
            }
        };
        Ok(Program {
            version: p.version(),
            execution_plan,
            constant_buffer,
            backend_delegate_data,
            segments,
            constant_segment,
            mutable_data_segments,
            named_data,
        })
    }

    fn subsegment(&mut self, c: fb::SubsegmentOffsets<'_>, path: &dyn Fn() -> String) -> R<SubsegmentOffsets> {
        Ok(SubsegmentOffsets { segment_index: c.segment_index(), offsets: self.vec(c.offsets(), path)? })
    }

    fn plan(&mut self, p: fb::ExecutionPlan<'_>, pi: usize) -> R<ExecutionPlan> {
        let at = |f: &str| format!("execution_plan[{pi}].{f}");
        let name = self.string(p.name(), &|| at("name"))?;
        let container_meta_type = match p.container_meta_type() {
            None => None,
            Some(c) => Some(ContainerMetadata {
                encoded_inp_str: self.string(c.encoded_inp_str(), &|| at("container_meta_type"))?,
                encoded_out_str: self.string(c.encoded_out_str(), &|| at("container_meta_type"))?,
            }),
        };
        let values = match p.values() {
            None => None,
            Some(v) => {
                self.charge(v.len() * std::mem::size_of::<EValue>(), &|| at("values"))?;
                let mut out = Vec::with_capacity(v.len());
                for (i, e) in v.iter().enumerate() {
                    out.push(self.evalue(e, &|| format!("execution_plan[{pi}].values[{i}]"))?);
                }
                Some(out)
            }
        };
        let inputs = self.vec(p.inputs(), &|| at("inputs"))?;
        let outputs = self.vec(p.outputs(), &|| at("outputs"))?;
        let chains = match p.chains() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (ci, c) in v.iter().enumerate() {
                    self.charge(std::mem::size_of::<Chain>(), &|| at("chains"))?;
                    out.push(self.chain(c, pi, ci)?);
                }
                Some(out)
            }
        };
        let operators = match p.operators() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, o) in v.iter().enumerate() {
                    let path = || format!("execution_plan[{pi}].operators[{i}]");
                    self.charge(std::mem::size_of::<Operator>(), &path)?;
                    out.push(Operator {
                        name: self.string(o.name(), &path)?,
                        overload: self.string(o.overload(), &path)?,
                    });
                }
                Some(out)
            }
        };
        let delegates = match p.delegates() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for (i, d) in v.iter().enumerate() {
                    let path = || format!("execution_plan[{pi}].delegates[{i}]");
                    self.charge(std::mem::size_of::<BackendDelegate>(), &path)?;
                    let compile_specs = match d.compile_specs() {
                        None => None,
                        Some(specs) => {
                            let mut cs = Vec::with_capacity(specs.len());
                            for s in specs.iter() {
                                self.charge(std::mem::size_of::<CompileSpec>(), &path)?;
                                cs.push(CompileSpec {
                                    key: self.string(s.key(), &path)?,
                                    value: self.bytes(s.value(), &path)?,
                                });
                            }
                            Some(cs)
                        }
                    };
                    out.push(BackendDelegate {
                        id: self.string(d.id(), &path)?,
                        processed: d.processed().map(|r| BackendDelegateDataReference {
                            location: DataLocation(r.location().0),
                            index: r.index(),
                        }),
                        compile_specs,
                    });
                }
                Some(out)
            }
        };
        let non_const_buffer_sizes = self.vec(p.non_const_buffer_sizes(), &|| at("non_const_buffer_sizes"))?;
        let non_const_buffer_device = match p.non_const_buffer_device() {
            None => None,
            Some(v) => {
                self.charge(v.len() * 16 + 24, &|| at("non_const_buffer_device"))?;
                Some(
                    v.iter()
                        .map(|d| NonConstBufferDevice {
                            buffer_idx: d.buffer_idx(),
                            device_type: DeviceType(d.device_type().0),
                            device_index: d.device_index(),
                        })
                        .collect(),
                )
            }
        };
        Ok(ExecutionPlan {
            name,
            container_meta_type,
            values,
            inputs,
            outputs,
            chains,
            operators,
            delegates,
            non_const_buffer_sizes,
            non_const_buffer_device,
        })
    }

    fn chain(&mut self, c: fb::Chain<'_>, pi: usize, ci: usize) -> R<Chain> {
        let at = |f: &str| format!("execution_plan[{pi}].chains[{ci}].{f}");
        let inputs = self.vec(c.inputs(), &|| at("inputs"))?;
        let outputs = self.vec(c.outputs(), &|| at("outputs"))?;
        let instructions = match c.instructions() {
            None => None,
            Some(v) => {
                self.charge(v.len() * std::mem::size_of::<Instruction>(), &|| at("instructions"))?;
                let mut out = Vec::with_capacity(v.len());
                for (i, ins) in v.iter().enumerate() {
                    out.push(
                        self.instruction(ins, &|| format!("execution_plan[{pi}].chains[{ci}].instructions[{i}]"))?,
                    );
                }
                Some(out)
            }
        };
        let stacktrace = match c.stacktrace() {
            None => None,
            Some(v) => {
                let mut out = Vec::with_capacity(v.len());
                for fl in v.iter() {
                    let path = || at("stacktrace");
                    self.charge(std::mem::size_of::<FrameList>(), &path)?;
                    let items = match fl.items() {
                        None => None,
                        Some(frames) => {
                            let mut fs = Vec::with_capacity(frames.len());
                            for f in frames.iter() {
                                self.charge(std::mem::size_of::<Frame>(), &path)?;
                                fs.push(Frame {
                                    filename: self.string(f.filename(), &path)?,
                                    lineno: f.lineno(),
                                    name: self.string(f.name(), &path)?,
                                    context: self.string(f.context(), &path)?,
                                });
                            }
                            Some(fs)
                        }
                    };
                    out.push(FrameList { items });
                }
                Some(out)
            }
        };
        Ok(Chain { inputs, outputs, instructions, stacktrace })
    }

    fn instruction(&mut self, ins: fb::Instruction<'_>, path: &dyn Fn() -> String) -> R<Instruction> {
        let tag = ins.instr_args_type();
        let missing = || FormatError::MissingUnionValue { union: "InstructionArguments", tag: tag.0, path: path() };
        Ok(match tag {
            fb::InstructionArguments::KernelCall => {
                let k = ins.instr_args_as_kernel_call().ok_or_else(missing)?;
                Instruction::KernelCall(KernelCall { op_index: k.op_index(), args: self.vec(k.args(), path)? })
            }
            fb::InstructionArguments::DelegateCall => {
                let k = ins.instr_args_as_delegate_call().ok_or_else(missing)?;
                Instruction::DelegateCall(DelegateCall {
                    delegate_index: k.delegate_index(),
                    args: self.vec(k.args(), path)?,
                })
            }
            fb::InstructionArguments::MoveCall => {
                let k = ins.instr_args_as_move_call().ok_or_else(missing)?;
                Instruction::MoveCall(MoveCall { move_from: k.move_from(), move_to: k.move_to() })
            }
            fb::InstructionArguments::JumpFalseCall => {
                let k = ins.instr_args_as_jump_false_call().ok_or_else(missing)?;
                Instruction::JumpFalseCall(JumpFalseCall {
                    cond_value_index: k.cond_value_index(),
                    destination_instruction: k.destination_instruction(),
                })
            }
            fb::InstructionArguments::FreeCall => {
                let k = ins.instr_args_as_free_call().ok_or_else(missing)?;
                Instruction::FreeCall(FreeCall { value_index: k.value_index() })
            }
            other => {
                return Err(FormatError::UnknownUnionTag {
                    union: "InstructionArguments",
                    tag: other.0,
                    path: format!("{}.instr_args_type", path()),
                });
            }
        })
    }

    fn evalue(&mut self, e: fb::EValue<'_>, path: &dyn Fn() -> String) -> R<EValue> {
        let tag = e.val_type();
        let missing = || FormatError::MissingUnionValue { union: "KernelTypes", tag: tag.0, path: path() };
        Ok(match tag {
            fb::KernelTypes::Null => EValue::Null,
            fb::KernelTypes::Int => EValue::Int(e.val_as_int().ok_or_else(missing)?.int_val()),
            fb::KernelTypes::Bool => EValue::Bool(e.val_as_bool().ok_or_else(missing)?.bool_val()),
            fb::KernelTypes::Double => EValue::Double(e.val_as_double().ok_or_else(missing)?.double_val()),
            fb::KernelTypes::String => {
                let s = e.val_as_string().ok_or_else(missing)?;
                EValue::String(self.string(s.string_val(), path)?)
            }
            fb::KernelTypes::Tensor => EValue::Tensor(self.tensor(e.val_as_tensor().ok_or_else(missing)?, path)?),
            fb::KernelTypes::IntList => {
                let l = e.val_as_int_list().ok_or_else(missing)?;
                EValue::IntList(self.vec(l.items(), path)?)
            }
            fb::KernelTypes::DoubleList => {
                let l = e.val_as_double_list().ok_or_else(missing)?;
                EValue::DoubleList(self.vec(l.items(), path)?)
            }
            fb::KernelTypes::BoolList => {
                let l = e.val_as_bool_list().ok_or_else(missing)?;
                EValue::BoolList(self.vec(l.items(), path)?)
            }
            fb::KernelTypes::TensorList => {
                let l = e.val_as_tensor_list().ok_or_else(missing)?;
                EValue::TensorList(self.vec(l.items(), path)?)
            }
            fb::KernelTypes::OptionalTensorList => {
                let l = e.val_as_optional_tensor_list().ok_or_else(missing)?;
                EValue::OptionalTensorList(self.vec(l.items(), path)?)
            }
            other => {
                return Err(FormatError::UnknownUnionTag {
                    union: "KernelTypes",
                    tag: other.0,
                    path: format!("{}.val_type", path()),
                });
            }
        })
    }

    fn tensor(&mut self, t: fb::Tensor<'_>, path: &dyn Fn() -> String) -> R<Tensor> {
        let sizes = self.vec(t.sizes(), path)?;
        let dim_order = self.vec(t.dim_order(), path)?;
        let extra_tensor_info = match t.extra_tensor_info() {
            None => None,
            Some(x) => Some(ExtraTensorInfo {
                mutable_data_segments_idx: x.mutable_data_segments_idx(),
                fully_qualified_name: self.string(x.fully_qualified_name(), path)?,
                location: TensorDataLocation(x.location().0),
                device_type: DeviceType(x.device_type().0),
                device_index: x.device_index(),
            }),
        };
        Ok(Tensor {
            scalar_type: ScalarType(t.scalar_type().0),
            storage_offset: t.storage_offset(),
            sizes,
            dim_order,
            requires_grad: t.requires_grad(),
            layout: t.layout(),
            data_buffer_idx: t.data_buffer_idx(),
            allocation_info: t.allocation_info().map(|a| AllocationDetails {
                memory_id: a.memory_id(),
                memory_offset_low: a.memory_offset_low(),
                memory_offset_high: a.memory_offset_high(),
            }),
            shape_dynamism: TensorShapeDynamism(t.shape_dynamism().0),
            extra_tensor_info,
        })
    }
}
