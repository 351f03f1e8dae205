# localize_hidden.cmake - makes the strong hidden symbols that an object defines local.
# cmake -DREADELF=readelf -DOBJCOPY=objcopy -DOBJ=tpla_static.o -P localize_hidden.cmake
# Weak ones stay: C++ inline functions and templates of the .cu host code (COMDAT groups,
# which the linker merges with a user's copies by name: a local one in a discarded group
# fails the link, review 104) and DW.ref.__gxx_personality_v0 (which a static libstdc++.a's
# eh_personality.o must find: run 226). Not objcopy --localize-hidden, which takes both.
execute_process(COMMAND ${READELF} -Ws --wide ${OBJ} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} ${OBJ} failed")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(names "")
# Num: Value Size Type Bind Vis Ndx Name (readelf prints sizes past 99999 in hex)
set(size "(0x[0-9a-f]+|[0-9]+)")
set(fields "^ *[0-9]+: [0-9a-f]+ +${size} [A-Z_]+ +GLOBAL +HIDDEN +([0-9]+|ABS|COM) (.+)$")
foreach(line IN LISTS lines)
  if(line MATCHES "${fields}")
    string(APPEND names "${CMAKE_MATCH_3}\n")
  endif()
endforeach()
file(WRITE ${OBJ}.localize "${names}")
execute_process(COMMAND ${OBJCOPY} --localize-symbols=${OBJ}.localize ${OBJ} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OBJCOPY} --localize-symbols ${OBJ} failed")
endif()
