# localize_hidden.cmake - makes the hidden symbols that an object defines local,
# except the linker's shared ones. cmake -DREADELF=readelf -DOBJCOPY=objcopy
# -DOBJ=tpla_static.o -P localize_hidden.cmake
# Not objcopy --localize-hidden: it also localizes DW.ref.__gxx_personality_v0 (the
# hidden weak copy of C++'s personality pointer every object with exceptions
# carries), which a static libstdc++.a's eh_personality.o then cannot find ("undefined
# hidden symbol ... can not be used when making a PIE object"; gcc 13 in /opt/gcc).
execute_process(COMMAND ${READELF} -Ws --wide ${OBJ} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} ${OBJ} failed")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(names "")
foreach(line IN LISTS lines)
  # Num: Value Size Type Bind Vis Ndx Name
  set(fields "^ *[0-9]+: [0-9a-f]+ +[0-9]+ [A-Z_]+ +(GLOBAL|WEAK) +HIDDEN +([0-9]+|ABS|COM) (.+)$")
  if(line MATCHES "${fields}")
    set(name "${CMAKE_MATCH_3}")
    if(NOT name MATCHES "^DW\\.ref\\.")
      string(APPEND names "${name}\n")
    endif()
  endif()
endforeach()
file(WRITE ${OBJ}.localize "${names}")
execute_process(COMMAND ${OBJCOPY} --localize-symbols=${OBJ}.localize ${OBJ} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OBJCOPY} --localize-symbols ${OBJ} failed")
endif()
