// The target types the DLL asked for (mqs_find_type), by the small integer keys it holds, and
// the fields it then asked about that the library lacks (dll-fields.ts). One registry per
// session: a type found again (another process, the same file) gets the same key.
import { type LengthUnit, lengthUnitOfLibrary, type MpiLibrary } from '@mqd/model';
import koffi from 'koffi';
import type { TypeRef } from '../inferior/debug-file.js';
import type { ProcessImage } from '../inferior/process-image.js';
import { FieldGaps, unexpectedLengthUnit } from './dll-fields.js';

export class DllTypes {
  private readonly types = new Map<number, TypeRef>();
  private readonly typeKeys = new Map<string, number>();
  /** The name each type key was found by (mqs_find_type), for fieldGaps. */
  private readonly typeNames = new Map<number, string>();
  /** Fields the DLL asked for that the library lacks (dll-fields.ts). */
  private readonly fieldGaps = new FieldGaps();

  /** mqs_find_type: the key of the type `name` in the image's files; 0 when there is none. */
  find(image: Pick<ProcessImage, 'findType'>, name: string): number {
    const ty = image.findType(name);
    if (!ty) return 0;
    const k = `${ty.file.buildId ?? ty.file.path}:${String(ty.dwarf === null ? 0 : koffi.address(ty.dwarf))}:${ty.offset}`;
    let key = this.typeKeys.get(k);
    if (key === undefined) {
      key = this.types.size + 1;
      this.typeKeys.set(k, key);
      this.types.set(key, ty);
      this.typeNames.set(key, name);
    }
    return key;
  }

  /** mqs_field_offset: the field's offset, or the answer FieldGaps gives for a missing one (-1). */
  fieldOffset(type: number, field: string): number {
    const ty = this.types.get(type);
    if (!ty) return -1;
    const off = ty.file.fieldOffset(ty, field);
    if (off >= 0) return off;
    return this.fieldGaps.answer(this.typeNames.get(type) ?? '?', field, (path) =>
      ty.file.fieldOffset(ty, path),
    );
  }

  /** mqs_sizeof: -1 for an unknown key. */
  sizeOf(type: number): number {
    const ty = this.types.get(type);
    return ty ? ty.file.sizeOf(ty) : -1;
  }

  /**
   * The unit of this DLL's unexpected-message lengths when it differs from the snapshot's
   * (lengthUnitOfLibrary): MPICH ch4's are bytes (dll-fields.ts unexpectedLengthUnit, known from
   * the types the DLL found), every other MPICH length counts elements. Undefined when the same.
   */
  unexpectedLengthUnit(library: MpiLibrary): LengthUnit | undefined {
    const unit = unexpectedLengthUnit(this.typeNames.values());
    return unit === lengthUnitOfLibrary(library) ? undefined : unit;
  }

  /** The fields the DLL asked for that were missing or renamed (RankSnapshot.dll). */
  gaps(): ReturnType<FieldGaps['info']> {
    return this.fieldGaps.info();
  }
}
