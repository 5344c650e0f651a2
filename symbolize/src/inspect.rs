//! One ELF image read whole, without a cache or a file: what the fuzz
//! target and the symbolizer's tests check.

use std::path::{Path, PathBuf};

use crate::lookup::{code_site, data_target};
use crate::{
    dwarf, elf, reloc, unwind_sections, CodeSite, DataTarget, ModuleInfo, Options, Origin, Reason,
    RelocationInfo, Symbolizer, UnwindSections,
};

/// What [`inspect_image`] read from one ELF image.
#[derive(Debug)]
pub struct Inspection {
    /// The module facts, as [`Symbolizer::module_info`] gives them.
    pub info: ModuleInfo,
    /// The `.gnu_debuglink` name and CRC, and the CRC-32 of the image.
    pub debuglink: Option<(Vec<u8>, u32)>,
    /// CRC-32 of the whole image (what a debuglink is checked against).
    pub crc: u32,
    /// Where a separate debug file would be looked for.
    pub debug_candidates: Vec<PathBuf>,
    /// [`Symbolizer::code`] of each offset (DWARF of the image itself).
    pub code: Vec<Result<CodeSite, Reason>>,
    /// [`Symbolizer::data`] of each offset.
    pub data: Vec<Result<DataTarget, Reason>>,
    /// [`Symbolizer::function_ranges`] of start-up's functions.
    pub functions: Vec<(String, std::ops::Range<u64>)>,
    /// [`Symbolizer::relocations`].
    pub relocations: Result<RelocationInfo, Reason>,
    /// [`unwind_sections`].
    pub unwind: Result<UnwindSections, Reason>,
}

/// Everything this crate reads from an ELF file, over an image in memory
/// instead of a path: module facts, debuglink, symbols, DWARF frames and
/// data targets of `file_offsets`, relocations and unwind sections. No
/// separate debug file is opened. The same code as the path-based API, so a
/// fuzzer feeding arbitrary bytes here tests what pfprof runs on files.
pub fn inspect_image(data: &[u8], file_offsets: &[u64]) -> Result<Inspection, Reason> {
    let file = elf::parse_elf(data).ok_or(Reason::NotElf)?;
    let build_id = elf::build_id(&file);
    let path = Path::new("/nonexistent/image");
    let debuglink = {
        use object::Object;
        file.gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, crc)| (name.to_vec(), crc))
    };
    let debug_candidates: Vec<PathBuf> = elf::debug_file_candidates(
        path,
        build_id.as_deref(),
        debuglink.as_ref().map(|(name, _)| &name[..]),
        &Options::default().debug_dirs,
    )
    .into_iter()
    .map(|c| c.path)
    .collect();
    let symbolizer = Symbolizer::new(Options::default());
    let module = symbolizer.parse_with(path, &file, None, build_id, Origin::Image)?;
    let dwarf = module
        .info
        .has_dwarf
        .then(|| dwarf::Dwarf::load(dwarf::Bytes::Owned(data.to_vec())))
        .flatten();
    let code = file_offsets
        .iter()
        .map(|&file_offset| {
            let svma = module
                .info
                .file_offset_to_svma(file_offset)
                .ok_or(Reason::NotInSegment)?;
            code_site(dwarf.as_ref(), [&module.symbols, &module.plt], svma, true)
        })
        .collect();
    let data_targets = file_offsets
        .iter()
        .map(|&file_offset| data_target(&module, file_offset, true))
        .collect();
    let functions = module.function_ranges(&["main", "__libc_start_call_main", "_start"]);
    Ok(Inspection {
        relocations: reloc::relocations(&file, &module.info),
        unwind: unwind_sections(data),
        info: module.info,
        debuglink,
        crc: elf::crc32(data),
        debug_candidates,
        code,
        data: data_targets,
        functions,
    })
}
